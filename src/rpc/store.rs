//! `CallStore`: `{substore, method, input}` -> [`StoreCall`] -> [`Store`] -> `{output}`.

use std::borrow::Cow;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use http::HeaderMap;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use prost::Message;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::call_log::{CallFields, CallLog};
use super::codec::{json_to_struct, struct_to_json};
use super::unknown_field::unknown_field;
use super::RpcState;
use crate::connect::{read_unary, unary_response, Code, Codec, ConnectError};
use crate::json_skim::to_quote_or_backslash;
use crate::metrics::Metrics;
use crate::proto::{CallStoreRequest, CallStoreResponse};
use crate::store::{Namespace, StoreCall, StoreOutput};

/// The request as the JSON codec carries it; `input` stays raw JSON text. An unknown field
/// is refused, naming it (see `unknown_field`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest<'a> {
    #[serde(default)]
    substore: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

pub async fn call_store(
    State(state): State<RpcState>,
    Extension(ns): Extension<Namespace>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut log = CallLog::start(StoreLine {
        call: Cow::Borrowed("?"),
        ns: &ns,
        metrics: &state.metrics,
    });
    match handle(&state, &ns, &headers, body, &mut log).await {
        Ok(response) => {
            log.finish("ok");
            response
        }
        Err(e) => {
            log.error = Some(e.message.clone());
            log.finish(e.code.as_str());
            e.into_response()
        }
    }
}

/// The store's log line: the call (`runEvents.append`), never its input; and its metrics.
struct StoreLine<'a> {
    call: CallName,
    ns: &'a Namespace,
    metrics: &'a Metrics,
}

impl CallFields for StoreLine<'_> {
    fn write(&self, outcome: &'static str, latency: Duration, error: Option<&str>) {
        // A metric label is one of the calls there are, never a name as sent.
        let call = match self.call {
            Cow::Borrowed(call) if call != "?" => call,
            _ => crate::metrics::UNDECODED,
        };
        self.metrics
            .store_call(self.ns.as_str(), call, outcome, latency);
        // An `Option` field is left out of the line when `None`. A call that went well is
        // a `debug` line: at the default level the log keeps runs, approvals and errors.
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    target: "callbackd::store",
                    namespace = self.ns.as_str(),
                    call = &*self.call,
                    outcome,
                    latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
                    error = error.map(tracing::field::display)
                )
            };
        }
        if outcome == "ok" {
            line!(debug);
        } else {
            line!(info);
        }
    }
}

async fn handle(
    state: &RpcState,
    ns: &Namespace,
    headers: &HeaderMap,
    body: Body,
    log: &mut CallLog<StoreLine<'_>>,
) -> Result<Response, ConnectError> {
    let req = read_unary(headers, body, state.limits).await?;
    let mut call = decode_named(req.codec, &req.body, &mut log.fields.call)?;
    let quotas = &state.quotas;
    let fut = async {
        let admitted = quotas.admit(ns, &mut call, req.body.len()).await?;
        let lifecycle = super::run_log::Lifecycle::of(&call);
        let appended_to = match (&call, &state.run_event) {
            (StoreCall::EventsAppend(e), Some(_)) => Some(e.run_id.clone()),
            _ => None,
        };
        let run_doc = matches!(call, StoreCall::RunsCreate(_) | StoreCall::RunsUpdate(_))
            .then(|| call.clone());
        match state.store.call(ns, call).await {
            Ok(output) => {
                quotas.done(admitted);
                if let (Some(hook), Some(run_id), Some(doc)) =
                    (&state.run_event, &appended_to, output.as_deref())
                {
                    hook(ns, run_id, doc);
                }
                if let Some(call) = run_doc {
                    state.bridge_runs.note(ns, &call);
                }
                // A run's end is the store's to announce (`StoreNotice::RunEnded`): the
                // daemon's listeners cancel its approvals, trace it, count it and take it
                // out of the runs file (`app::run_ends`).
                if let Some(lifecycle) = lifecycle {
                    lifecycle.record(ns, &state.metrics);
                }
                Ok(output)
            }
            Err(e) => {
                quotas.refused_by_store(ns, &e);
                Err(e)
            }
        }
    };
    let output = match req.timeout {
        None => fut.await?,
        Some(t) => tokio::time::timeout(t, fut).await.map_err(|_| {
            ConnectError::new(
                Code::DeadlineExceeded,
                format!(
                    "store call did not finish within the {} ms deadline",
                    t.as_millis()
                ),
            )
        })??,
    };
    encode(req.codec, output)
}

/// Decodes a `CallStore` request body into a typed call. Every failure is a client
/// mistake (`invalid_argument`); public so the property tests can drive it directly.
pub fn decode_request(codec: Codec, body: &[u8]) -> Result<StoreCall, ConnectError> {
    decode_named(codec, body, &mut Cow::Borrowed("?"))
}

/// [`decode_request`], also setting `call` to the call the request names (see [`CallName`]).
pub fn decode_named(
    codec: Codec,
    body: &[u8],
    call: &mut CallName,
) -> Result<StoreCall, ConnectError> {
    match codec {
        Codec::Json => parse_json(body, call),
        Codec::Proto => parse_proto(body, call),
    }
}

fn parse_json(body: &[u8], call: &mut CallName) -> Result<StoreCall, ConnectError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ConnectError::invalid_argument("request body is not valid UTF-8"))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    if !text.trim_start().starts_with('{') {
        return Err(ConnectError::invalid_argument(
            "request body must be a JSON object (sdk.v1.CallStoreRequest)",
        ));
    }
    check_json_text(text.as_bytes()).map_err(ConnectError::invalid_argument)?;
    let req: JsonRequest<'_> = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        match serde_unknown_field(&message) {
            Some(field) => unknown_field(REQUEST, field, &["substore", "method", "input"]),
            None => ConnectError::invalid_argument(format!("invalid JSON for {REQUEST}: {e}")),
        }
    })?;
    let input = req.input.map_or("{}", |raw| raw.get());
    to_call(req.substore, req.method, input, call)
}

const REQUEST: &str = "sdk.v1.CallStoreRequest";

/// The field of serde's "unknown field `NAME`, expected one of ..." message.
fn serde_unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.rfind("`, expected").map(|end| &rest[..end])
}

/// Deepest JSON nesting accepted. Documents are stored as raw text, so without this a
/// payload nested thousands deep would be stored, and then fail to decode in any parser
/// with a recursion limit (serde_json's is 128; the proto codec's reads use it).
const MAX_JSON_DEPTH: usize = 100;

/// Refuses JSON text that serde_json would skip over here (documents are kept as raw text)
/// but not decode later, when a proto-codec read turns the stored document into a Struct:
/// nesting deeper than [`MAX_JSON_DEPTH`], numbers beyond a double (`1e400`), and unpaired
/// UTF-16 surrogate escapes (`"\ud800"`). Without this such a document is accepted and then
/// every proto read of it fails as `internal`. O(n), no recursion, no allocation; it does
/// not validate the rest (the parser does that next).
fn check_json_text(json: &[u8]) -> Result<(), String> {
    let (mut i, mut depth) = (0usize, 0usize);
    while i < json.len() {
        match json[i] {
            b'"' => {
                i = skip_string(json, i + 1)?;
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(format!(
                        "request JSON is nested deeper than {MAX_JSON_DEPTH} levels"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < json.len()
                    && matches!(json[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let number = &json[start..i];
                // Only an exponent or 309+ digits can overflow a double.
                if number.len() > 308 || number.iter().any(|b| matches!(b, b'e' | b'E')) {
                    let text = std::str::from_utf8(number).unwrap_or_default();
                    if text.parse::<f64>().is_ok_and(f64::is_infinite) {
                        return Err(format!(
                            "request JSON has a number beyond the range of a double ({:.40})",
                            text
                        ));
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Skips a JSON string whose opening quote is just before `i`; returns the index after its
/// closing quote (or the end). Checks that `\u` surrogate escapes come in pairs.
fn skip_string(json: &[u8], mut i: usize) -> Result<usize, String> {
    let hex4 = |at: usize| -> Option<u32> {
        let digits = json.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    while i < json.len() {
        i = to_quote_or_backslash(json, i);
        if i == json.len() {
            break;
        }
        match json[i] {
            b'"' => return Ok(i + 1),
            b'\\' if json.get(i + 1) == Some(&b'u') => {
                let Some(unit) = hex4(i + 2) else {
                    return Ok(i + 2); // malformed: the parser reports it
                };
                i += 6;
                if (0xDC00..0xE000).contains(&unit) {
                    return Err(unpaired(unit));
                }
                if (0xD800..0xDC00).contains(&unit) {
                    let low = (json.get(i) == Some(&b'\\') && json.get(i + 1) == Some(&b'u'))
                        .then(|| hex4(i + 2))
                        .flatten();
                    match low {
                        Some(low) if (0xDC00..0xE000).contains(&low) => i += 6,
                        _ => return Err(unpaired(unit)),
                    }
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Ok(i)
}

fn unpaired(unit: u32) -> String {
    format!("request JSON has an unpaired UTF-16 surrogate escape (\\u{unit:04x})")
}

fn parse_proto(body: &[u8], call: &mut CallName) -> Result<StoreCall, ConnectError> {
    let req = CallStoreRequest::decode(body).map_err(|e| {
        ConnectError::invalid_argument(format!("invalid protobuf for sdk.v1.CallStoreRequest: {e}"))
    })?;
    let input = match &req.input {
        Some(s) => struct_to_json(s)
            .map_err(|e| ConnectError::invalid_argument(format!("invalid input: {e}")))?
            .to_string(),
        None => "{}".to_string(),
    };
    to_call(Some(req.substore), Some(req.method), &input, call)
}

/// The call a request names, for its log line: `substore.method` as soon as both are read,
/// even when the rest of the request is then refused.
pub type CallName = Cow<'static, str>;

/// Longest substore or method name put in a log line as sent.
const MAX_LOGGED_NAME: usize = 40;

fn to_call(
    substore: Option<String>,
    method: Option<String>,
    input: &str,
    call: &mut CallName,
) -> Result<StoreCall, ConnectError> {
    let substore = substore
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ConnectError::invalid_argument("substore is required"))?;
    let method = method
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ConnectError::invalid_argument("method is required"))?;
    let cut = |s: &str| -> String { s.chars().take(MAX_LOGGED_NAME).collect() };
    let named = format!("{}.{}", cut(&substore), cut(&method));
    *call = match StoreCall::NAMES.iter().find(|n| **n == named) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(named),
    };
    if !input.trim_start().starts_with('{') {
        return Err(ConnectError::invalid_argument(
            "input must be a JSON object",
        ));
    }
    let parsed = StoreCall::parse(&substore, &method, input)?;
    *call = Cow::Borrowed(parsed.name());
    Ok(parsed)
}

fn encode(codec: Codec, output: StoreOutput) -> Result<Response, ConnectError> {
    Ok(match codec {
        Codec::Json => match output {
            Some(json) if json.len() >= OutputBody::MIN_LEN => {
                unary_response(Codec::Json, Body::new(OutputBody::new(json)))
            }
            Some(json) => {
                let mut body = String::with_capacity(json.len() + 11);
                body.push_str(r#"{"output":"#);
                body.push_str(&json);
                body.push('}');
                unary_response(Codec::Json, body)
            }
            None => unary_response(Codec::Json, "{}"),
        },
        Codec::Proto => {
            let output = match output {
                Some(json) => {
                    let value: serde_json::Value = serde_json::from_str(&json).map_err(|e| {
                        ConnectError::internal(format!("stored document is not valid JSON: {e}"))
                    })?;
                    Some(json_to_struct(&value).ok_or_else(|| {
                        ConnectError::internal("stored document is not a JSON object")
                    })?)
                }
                None => None,
            };
            unary_response(Codec::Proto, CallStoreResponse { output }.encode_to_vec())
        }
    })
}

/// `{"output":`, a large output (a page of events can be a few hundred kilobytes) and `}`
/// as three buffers, so the output is not copied once more to wrap it. The size is exact, so
/// hyper still sends a Content-Length, and writes the three with one vectored write.
struct OutputBody {
    parts: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl OutputBody {
    /// Below this the copy costs less than the extra buffers.
    const MIN_LEN: usize = 16 * 1024;

    fn new(json: String) -> OutputBody {
        let parts: std::collections::VecDeque<Bytes> = [
            Bytes::from_static(br#"{"output":"#),
            Bytes::from(json),
            Bytes::from_static(b"}"),
        ]
        .into();
        let remaining = parts.iter().map(|b| b.len() as u64).sum();
        OutputBody { parts, remaining }
    }
}

impl HttpBody for OutputBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let part = self.parts.pop_front();
        if let Some(part) = &part {
            self.remaining -= part.len() as u64;
        }
        std::task::Poll::Ready(part.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::check_json_text;

    #[test]
    fn nesting_is_counted_outside_strings_only() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(check_json_text(deep(100).as_bytes()).is_ok());
        assert!(check_json_text(deep(101).as_bytes())
            .unwrap_err()
            .contains("nested deeper than 100"));
        let in_string = format!(r#"{{"a":"{}"}}"#, "[".repeat(500));
        assert!(check_json_text(in_string.as_bytes()).is_ok());
        assert!(check_json_text(br#"{"a":"\\\"[["}"#).is_ok());
    }

    #[test]
    fn numbers_beyond_a_double_are_refused() {
        for bad in ["1e400", "-1E+309", "[0.5e999]"] {
            let err = check_json_text(bad.as_bytes()).unwrap_err();
            assert!(err.contains("beyond the range of a double"), "{bad}: {err}");
        }
        let many_digits = "9".repeat(400);
        assert!(check_json_text(many_digits.as_bytes()).is_err());
        for ok in [
            "1e308",
            "1e-400",
            "-0.0",
            "123456789012345678901234567890",
            r#""1e400""#,
        ] {
            assert!(check_json_text(ok.as_bytes()).is_ok(), "{ok}");
        }
    }

    #[test]
    fn unpaired_surrogate_escapes_are_refused() {
        for bad in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#"{"\uDBFF":1}"#,
        ] {
            let err = check_json_text(bad.as_bytes()).unwrap_err();
            assert!(err.contains("unpaired UTF-16 surrogate"), "{bad}: {err}");
        }
        for ok in [r#""\ud83d\ude00""#, r#""\u00e9\\ud800""#, r#""\u12""#] {
            assert!(check_json_text(ok.as_bytes()).is_ok(), "{ok}");
        }
    }
}
