//! One stream event as one line of text: `#SEQ HH:MM:SS TYPE details`. Colour (ANSI) only
//! when asked for, i.e. when stdout is a terminal; piped output is plain and greppable.

use serde_json::Value;

/// How lines are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub colour: bool,
}

const RESET: &str = "\x1b[0m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const CYAN: &str = "\x1b[36m";

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    }
}

fn s<'a>(ev: &'a Value, key: &str) -> &'a str {
    ev.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Text on one line: newlines and other control characters escaped.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// `{"inputTokens": 20, "outputTokens": 12}` -> `input 20, output 12`.
pub fn usage(u: &Value) -> String {
    let Some(map) = u.as_object() else {
        return String::new();
    };
    // The order a reader scans for: what went in, what came out, the cache, the total.
    const ORDER: [&str; 5] = [
        "inputTokens",
        "outputTokens",
        "cacheReadTokens",
        "cacheWriteTokens",
        "totalTokens",
    ];
    let rank = |k: &str| ORDER.iter().position(|o| *o == k).unwrap_or(ORDER.len());
    let mut counts: Vec<(&String, u64)> = map
        .iter()
        .filter_map(|(k, v)| v.as_u64().map(|n| (k, n)))
        .collect();
    counts.sort_by_key(|(k, _)| rank(k));
    counts
        .into_iter()
        .map(|(k, n)| {
            let mut name = String::new();
            for c in k.chars() {
                if c.is_uppercase() {
                    name.push(' ');
                    name.extend(c.to_lowercase());
                } else if c == '_' {
                    name.push(' ');
                } else {
                    name.push(c);
                }
            }
            let name = name.trim_end_matches(" tokens").trim_end_matches(" token");
            format!("{name} {n}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Characters of a prompt, tool arguments or result a line shows before it folds the rest.
const FOLD_CHARS: usize = 200;

/// `text` on one line, its first [`FOLD_CHARS`] characters and how many more there are.
fn folded(text: &str) -> String {
    let n = text.chars().count();
    if n <= FOLD_CHARS {
        return one_line(text);
    }
    let head: String = text.chars().take(FOLD_CHARS).collect();
    format!("{}… (+{} characters)", one_line(&head), n - FOLD_CHARS)
}

/// ` args {...}`: a JSON field of the event, compact and folded; nothing when absent.
fn json_field(ev: &Value, key: &str, label: &str) -> String {
    match ev.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(v) => {
            let cut = if ev.get("truncated").and_then(Value::as_bool) == Some(true) {
                " (cut at 64 KiB)"
            } else {
                ""
            };
            format!(" {label} {}{cut}", folded(&v.to_string()))
        }
    }
}

/// A `tool_completed`'s decision or question, as words: ` approved by alice`,
/// ` denied by bob: too risky`, ` asked "Which region?", answered "eu" by alice`.
fn decided(ev: &Value) -> String {
    if let Some(q) = ev.get("question").filter(|q| q.is_object()) {
        let text = one_line(q.get("text").and_then(Value::as_str).unwrap_or(""));
        return match q.get("answer").and_then(Value::as_str) {
            Some(a) => format!(
                ": asked \"{text}\", answered \"{}\" by {}",
                one_line(a),
                q.get("answered_by").and_then(Value::as_str).unwrap_or("?")
            ),
            None => format!(": asked \"{text}\", not answered"),
        };
    }
    let Some(d) = ev.get("decision").filter(|d| d.is_object()) else {
        return String::new();
    };
    format!(
        ", {} by {}{}",
        d.get("decision").and_then(Value::as_str).unwrap_or("?"),
        d.get("by").and_then(Value::as_str).unwrap_or("?"),
        d.get("reason")
            .and_then(Value::as_str)
            .map(|r| format!(": {}", one_line(r)))
            .unwrap_or_default()
    )
}

/// `12 ms`, `4.02 s`.
fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", ms as f64 / 1000.0)
    }
}

/// The line for one event, or `None` for an event the text view leaves out (`token`s: the
/// `message_snapshot` that follows them carries the whole text).
pub fn line(ev: &Value, style: Style) -> Option<String> {
    let ty = s(ev, "type");
    let seq = ev.get("seq").and_then(Value::as_u64);
    let at = s(ev, "at");
    // RFC 3339: the clock time is characters 11..19 (UTC).
    let time = at.get(11..19).unwrap_or("");
    let (label, colour, text) = match ty {
        "token" => return None,
        "run_started" => (
            "started".to_string(),
            CYAN,
            format!(
                "session {}, model {}{}",
                s(ev, "session_id"),
                ev.pointer("/agent/model")
                    .and_then(Value::as_str)
                    .unwrap_or("default"),
                ev.pointer("/input/text")
                    .and_then(Value::as_str)
                    .map(|t| format!(": {}", folded(t)))
                    .unwrap_or_default()
            ),
        ),
        "step" => {
            let index = ev.get("index").and_then(Value::as_u64).unwrap_or(0);
            let what = match s(ev, "kind") {
                "status" => format!("status {}", s(ev, "status")),
                "thinking" if !s(ev, "text").is_empty() => {
                    format!("thinking: {}", one_line(s(ev, "text")))
                }
                k => k.to_string(),
            };
            (format!("step {index}"), DIM, what)
        }
        "message_snapshot" => ("assistant".into(), BOLD, one_line(s(ev, "text"))),
        "tool_started" => (
            "tool".into(),
            CYAN,
            format!(
                "{} started ({}){}",
                s(ev, "tool"),
                s(ev, "tool_call_id"),
                json_field(ev, "arguments", "args")
            ),
        ),
        "tool_completed" => {
            let outcome = s(ev, "outcome");
            let ms = ev.get("duration_ms").and_then(Value::as_u64);
            let colour = match outcome {
                "ok" => GREEN,
                "denied" | "expired" | "cancelled" => YELLOW,
                _ => RED,
            };
            (
                "tool".into(),
                colour,
                format!(
                    "{} {outcome}{}{} ({}){}{}{}",
                    s(ev, "tool"),
                    ms.map(|m| format!(" in {}", duration(m)))
                        .unwrap_or_default(),
                    ev.get("waited_ms")
                        .and_then(Value::as_u64)
                        .map(|m| format!(" after {} waiting for a person", duration(m)))
                        .unwrap_or_default(),
                    s(ev, "tool_call_id"),
                    decided(ev),
                    if ev.get("requested_arguments").is_some() {
                        format!(
                            "{}{}",
                            json_field(ev, "arguments", "ran with"),
                            json_field(ev, "requested_arguments", "(the model asked") + ")"
                        )
                    } else {
                        String::new()
                    },
                    json_field(ev, "result", "->")
                ),
            )
        }
        "plan" => {
            let items = ev
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let list: Vec<String> = items
                .iter()
                .map(|i| {
                    let mark = match s(i, "status") {
                        "completed" => "[x]",
                        "in_progress" => "[>]",
                        _ => "[ ]",
                    };
                    format!("{mark} {}", one_line(s(i, "title")))
                })
                .collect();
            ("plan".into(), CYAN, list.join("  "))
        }
        "tool_outcome_unknown" => (
            "tool".into(),
            YELLOW,
            format!(
                "{} outcome unknown: {} ({})",
                s(ev, "tool"),
                s(ev, "reason"),
                s(ev, "tool_call_id")
            ),
        ),
        "task" => (
            "task".into(),
            DIM,
            format!(
                "{} {}{}",
                s(ev, "title"),
                s(ev, "status"),
                ev.get("progress")
                    .filter(|p| !p.is_null())
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default()
            ),
        ),
        "usage" => (
            "usage".into(),
            DIM,
            usage(ev.get("usage").unwrap_or(&Value::Null)),
        ),
        "completed" => {
            let status = s(ev, "status");
            let mut text = status.to_string();
            if !s(ev, "output").is_empty() {
                text.push_str(&format!(": {}", one_line(s(ev, "output"))));
            }
            if let Some(u) = ev.get("usage").filter(|u| u.is_object()) {
                text.push_str(&format!(" [{}]", usage(u)));
            }
            (
                "completed".into(),
                if status == crate::run::RunStatus::Finished.as_str() {
                    GREEN
                } else {
                    YELLOW
                },
                text,
            )
        }
        "error" => {
            let p = ev.get("problem").unwrap_or(&Value::Null);
            let detail = p
                .get("detail")
                .and_then(Value::as_str)
                .or_else(|| p.get("title").and_then(Value::as_str))
                .unwrap_or("the run failed");
            let code = p.get("code").and_then(Value::as_str);
            (
                "error".into(),
                RED,
                format!(
                    "{}{}",
                    one_line(detail),
                    code.map(|c| format!(" ({c})")).unwrap_or_default()
                ),
            )
        }
        "sdk_message" => (
            "event".into(),
            DIM,
            ev.pointer("/message/type")
                .and_then(Value::as_str)
                .unwrap_or("sdk_message")
                .to_string(),
        ),
        "up_to_date" => ("live".into(), DIM, "caught up; what follows is live".into()),
        "approval_required" => {
            let a = |k: &str| {
                ev.pointer(&format!("/approval/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            let args = ev.pointer("/approval/args").cloned().unwrap_or(Value::Null);
            (
                "approval".into(),
                YELLOW,
                format!(
                    "{} waits for approval: {} until {}; callbackd approve {} [--args '...'] \
                     or callbackd deny {} --reason '...'",
                    a("tool"),
                    one_line(&args.to_string()),
                    a("expires_at").get(11..19).unwrap_or("?"),
                    a("id"),
                    a("id"),
                ),
            )
        }
        "question" => {
            let q = |k: &str| {
                ev.pointer(&format!("/question/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            let options: Vec<&str> = ev
                .pointer("/question/options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (
                "question".into(),
                YELLOW,
                format!(
                    "{}{}; answer with callbackd answer {} {} '...' (or the console)",
                    one_line(&q("text")),
                    if options.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", one_line(&options.join(" / ")))
                    },
                    s(ev, "run_id"),
                    q("id"),
                ),
            )
        }
        "question_resolved" => (
            "question".into(),
            YELLOW,
            match ev.get("answer").and_then(Value::as_str) {
                Some(answer) => format!("answered by {}: {}", s(ev, "by"), one_line(answer)),
                None => format!(
                    "{}{}",
                    s(ev, "outcome"),
                    ev.get("reason")
                        .and_then(Value::as_str)
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            },
        ),
        "approval_resolved" => (
            "approval".into(),
            YELLOW,
            format!(
                "{} by {}{}{}",
                s(ev, "decision"),
                s(ev, "by"),
                if ev.get("edited").and_then(Value::as_bool) == Some(true) {
                    " with edited arguments"
                } else {
                    ""
                },
                ev.get("reason")
                    .and_then(Value::as_str)
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ),
        ),
        // reconnect and stream_gap are the follower's business (it reports them on stderr).
        "reconnect" | "stream_gap" => return None,
        other => ("event".into(), DIM, other.to_string()),
    };
    // Durable events carry their seq; control events show a blank seq column. A control
    // event's `seq` is the last durable one when it was sent (`0` before any), not its own
    // place: shown, a pending approval read `#0` above `#1` and a decision sat under the
    // previous event's number.
    let control = matches!(
        ty,
        "up_to_date" | "approval_required" | "approval_resolved" | "question"
    );
    let seq = match seq {
        Some(n) if !control => format!("#{n}"),
        _ => String::new(),
    };
    // Run data (tool names, task titles, reasons, ids) goes to a terminal: no control
    // character of it reaches the terminal raw, whatever field it came in (an escape
    // sequence in a tool's name could rewrite the screen or the window title).
    let (time, text) = (one_line(time), one_line(&text));
    Some(format!(
        "{} {} {} {}",
        style.paint(DIM, &format!("{seq:>5}")),
        style.paint(DIM, &format!("{time:<8}")),
        style.paint(colour, &format!("{label:<10}")),
        text
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { colour: false };

    /// Broken by printing `text` as it is, the escape reaches the line raw.
    #[test]
    fn no_control_character_of_run_data_reaches_the_terminal() {
        let esc = "\u{1b}]0;owned\u{7}\u{1b}[2J";
        for ev in [
            json!({"type": "tool_started", "seq": 3, "tool": esc, "tool_call_id": esc}),
            json!({"type": "task", "seq": 4, "title": esc, "status": esc}),
            json!({"type": "approval_resolved", "decision": "deny", "by": esc, "reason": esc}),
            json!({"type": "tool_outcome_unknown", "tool": esc, "reason": esc}),
            json!({"type": esc, "at": format!("2026-01-01T{esc}")}),
        ] {
            let line = line(&ev, PLAIN).unwrap();
            assert!(!line.chars().any(char::is_control), "{line:?}");
        }
    }

    #[test]
    fn every_kind_of_event_reads_as_one_line() {
        let at = "2026-12-01T10:11:12.345Z";
        let cases = [
            (
                json!({"type":"run_started","seq":1,"at":at,"session_id":"s1","agent":{"id":"s1","model":"composer-2"}}),
                "   #1 10:11:12 started    session s1, model composer-2",
            ),
            (
                json!({"type":"step","seq":2,"at":at,"index":1,"kind":"status","status":"RUNNING"}),
                "   #2 10:11:12 step 1     status RUNNING",
            ),
            (
                json!({"type":"message_snapshot","seq":3,"at":at,"message_id":"m","text":"two\nlines","delta":2}),
                "   #3 10:11:12 assistant  two\\nlines",
            ),
            (
                json!({"type":"tool_started","seq":4,"at":at,"tool_call_id":"t1","tool":"echo"}),
                "   #4 10:11:12 tool       echo started (t1)",
            ),
            (
                json!({"type":"tool_completed","seq":5,"at":at,"tool_call_id":"t1","tool":"echo","outcome":"ok","duration_ms":12}),
                "   #5 10:11:12 tool       echo ok in 12 ms (t1)",
            ),
            (
                json!({"type":"run_started","seq":1,"at":at,"session_id":"s1","agent":{"id":"s1"},"input":{"text":"refund\norder 42"}}),
                "   #1 10:11:12 started    session s1, model default: refund\\norder 42",
            ),
            (
                json!({"type":"tool_started","seq":4,"at":at,"tool_call_id":"t1","tool":"echo","arguments":{"x":1}}),
                r#"   #4 10:11:12 tool       echo started (t1) args {"x":1}"#,
            ),
            (
                json!({"type":"plan","seq":5,"at":at,"tool_call_id":"t3","items":[{"title":"read","status":"completed"},{"title":"refund","status":"in_progress"},{"title":"tell","status":"pending"}]}),
                "   #5 10:11:12 plan       [x] read  [>] refund  [ ] tell",
            ),
            (
                json!({"type":"tool_outcome_unknown","seq":6,"at":at,"tool_call_id":"t2","tool":"sh","reason":"timed out"}),
                "   #6 10:11:12 tool       sh outcome unknown: timed out (t2)",
            ),
            (
                json!({"type":"usage","seq":7,"at":at,"usage":{"inputTokens":20,"outputTokens":12}}),
                "   #7 10:11:12 usage      input 20, output 12",
            ),
            (
                json!({"type":"completed","seq":8,"at":at,"status":"finished","output":"done","usage":{"inputTokens":20}}),
                "   #8 10:11:12 completed  finished: done [input 20]",
            ),
            (
                json!({"type":"error","seq":9,"at":at,"status":"error","problem":{"detail":"[internal] backend down","code":"internal"}}),
                "   #9 10:11:12 error      [internal] backend down (internal)",
            ),
            (
                json!({"type":"sdk_message","seq":10,"at":at,"message":{"type":"system"}}),
                "  #10 10:11:12 event      system",
            ),            (
                json!({"type":"approval_required","run_id":"r1","at":at,"approval":{"id":"appr_1","tool":"deploy","args":{"env":"prod"},"expires_at":"2026-12-01T10:21:12.000Z"}}),
                "      10:11:12 approval   deploy waits for approval: {\"env\":\"prod\"} until 10:21:12; callbackd approve appr_1 [--args '...'] or callbackd deny appr_1 --reason '...'",
            ),
            (
                json!({"type":"question","run_id":"r1","at":at,"question":{"id":"appr_2","text":"Deploy?","options":["yes","no"],"expires_at":at}}),
                "      10:11:12 question   Deploy? [yes / no]; answer with callbackd answer r1 appr_2 '...' (or the console)",
            ),
            (
                json!({"type":"question_resolved","run_id":"r1","at":at,"question_id":"appr_2","outcome":"answered","answer":"yes","by":"default/alice","reason":null}),
                "      10:11:12 question   answered by default/alice: yes",
            ),
            (
                json!({"type":"tool_completed","seq":7,"at":at,"tool_call_id":"t2","tool":"deploy","outcome":"ok","duration_ms":12,"waited_ms":3000,"arguments":{"v":"2-hotfix"},"requested_arguments":{"v":"2"},"result":{"deployed":"2-hotfix"},"decision":{"approval_id":"a1","decision":"approved","by":"default/alice","at":at,"reason":null,"edited":true}}),
                r#"   #7 10:11:12 tool       deploy ok in 12 ms after 3.00 s waiting for a person (t2), approved by default/alice ran with {"v":"2-hotfix"} (the model asked {"v":"2"}) -> {"deployed":"2-hotfix"}"#,
            ),
            (
                json!({"type":"tool_completed","seq":8,"at":at,"tool_call_id":"t3","tool":"ask_user","outcome":"ok","duration_ms":1,"waited_ms":900,"arguments":{"question":"Region?"},"result":{"answer":"eu"},"question":{"question_id":"a2","text":"Region?","options":["eu","us"],"answer":"eu","answered_by":"default/alice","answered_at":at}}),
                r#"   #8 10:11:12 tool       ask_user ok in 1 ms after 900 ms waiting for a person (t3): asked "Region?", answered "eu" by default/alice -> {"answer":"eu"}"#,
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(line(&ev, PLAIN).as_deref(), Some(want), "{ev}");
        }
        // A long result is folded; a held call says how long it waited for a person.
        let ev = json!({"type":"tool_completed","seq":5,"at":at,"tool_call_id":"t1","tool":"echo","outcome":"ok","duration_ms":12,"waited_ms":3000,"result":"y".repeat(250),"truncated":true});
        assert_eq!(
            line(&ev, PLAIN).unwrap(),
            format!(
                r#"   #5 10:11:12 tool       echo ok in 12 ms after 3.00 s waiting for a person (t1) -> "{}… (+52 characters) (cut at 64 KiB)"#,
                "y".repeat(199)
            )
        );
        assert_eq!(
            line(&json!({"type":"token","seq":3,"text":"x","delta":1}), PLAIN),
            None
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let ev =
            json!({"type":"error","seq":1,"at":"2026-12-01T10:11:12Z","problem":{"detail":"x"}});
        assert!(!line(&ev, PLAIN).unwrap().contains('\x1b'));
        let coloured = line(&ev, Style { colour: true }).unwrap();
        assert!(coloured.contains(RED), "{coloured:?}");
        // Control characters from a model never reach the terminal raw.
        let evil = json!({"type":"message_snapshot","seq":2,"text":"a\x1b[2Jb"});
        assert!(!line(&evil, PLAIN).unwrap().contains('\x1b'));
    }

    #[test]
    fn control_events_show_no_seq_of_their_own() {
        let at = "2026-12-01T10:11:12Z";
        let pending = json!({"type":"approval_required","seq":0,"at":at,"approval":{"id":"a","tool":"deploy","args":{}}});
        let decided = json!({"type":"approval_resolved","seq":4,"at":at,"approval_id":"a","decision":"approved","by":"default/api"});
        for ev in [pending, decided] {
            let text = line(&ev, PLAIN).unwrap();
            assert!(text.starts_with("      10:11:12 approval "), "{text}");
        }
        let durable =
            json!({"type":"step","seq":4,"at":at,"index":1,"kind":"status","status":"RUNNING"});
        assert!(line(&durable, PLAIN).unwrap().starts_with("   #4 "));
    }
}
