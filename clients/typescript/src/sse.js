// A Server-Sent Events reader over a fetch() body (a ReadableStream of bytes), following the
// WHATWG parsing rules: lines end in CRLF, LF or CR; `data` lines join with "\n"; one leading
// space after the colon is dropped; a blank line dispatches; a partial event at the end of the
// stream is dropped. Comment lines (": keepalive") are yielded too.

/**
 * Yields {kind: "event", id: string|null, data: string, retry: number|null} and
 * {kind: "comment", text}. `id` is null when the event had no `id:` line (the run API marks
 * exactly its durable events with one). `retry` is the last `retry:` field seen in the block.
 */
export async function* readSse(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let ev = blank();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buf += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        const nl = nextBreak(buf, start, done);
        if (!nl) break;
        const line = buf.slice(start, nl.at);
        start = nl.at + nl.len;
        if (line === "") {
          if (ev.data.length || ev.id !== null) {
            yield { kind: "event", id: ev.id, data: ev.data.join("\n"), retry: ev.retry };
          } else if (ev.retry !== null) {
            yield { kind: "retry", retry: ev.retry };
          }
          ev = blank();
          continue;
        }
        if (line.startsWith(":")) {
          yield { kind: "comment", text: line.slice(1).trim() };
          continue;
        }
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "data") ev.data.push(val);
        else if (field === "id") {
          if (!val.includes("\0")) ev.id = val;
        } else if (field === "retry" && /^\d+$/.test(val)) ev.retry = Number(val);
      }
      buf = buf.slice(start);
      if (done) return;
    }
  } finally {
    // Stops the body (and so the connection) when the consumer stops early.
    reader.cancel().catch(() => {});
  }
}

function blank() {
  return { data: [], id: null, retry: null };
}

// The next line break at or after `from`: {at, len}, or null. A CR at the very end of the
// buffer may be the first half of a CRLF, so it waits for more input unless the stream ended.
function nextBreak(buf, from, done) {
  for (let i = from; i < buf.length; i++) {
    const c = buf.charCodeAt(i);
    if (c === 10) return { at: i, len: 1 };
    if (c === 13) {
      if (i + 1 < buf.length) return { at: i, len: buf.charCodeAt(i + 1) === 10 ? 2 : 1 };
      return done ? { at: i, len: 1 } : null;
    }
  }
  return null;
}
