//! `CallStore`: `{substore, method, input}` -> [`StoreCall`] -> [`Store`] -> `{output}`.

use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http::HeaderMap;
use prost::Message;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::codec::{json_to_struct, struct_to_json};
use super::RpcState;
use crate::connect::{read_unary, unary_response, Code, Codec, ConnectError};
use crate::proto::{CallStoreRequest, CallStoreResponse};
use crate::store::{Namespace, StoreCall, StoreOutput};

/// The request as the JSON codec carries it; `input` stays raw JSON text.
#[derive(Deserialize)]
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
    let started = Instant::now();
    let mut name = "?";
    let result = handle(&state, &ns, &headers, body, &mut name).await;
    let latency_us = started.elapsed().as_micros() as u64;
    match result {
        Ok(response) => {
            tracing::info!(target: "callbackd::store", call = name, outcome = "ok", latency_us);
            response
        }
        Err(e) => {
            tracing::info!(
                target: "callbackd::store",
                call = name,
                outcome = e.code.as_str(),
                latency_us,
                error = %e.message
            );
            e.into_response()
        }
    }
}

async fn handle(
    state: &RpcState,
    ns: &Namespace,
    headers: &HeaderMap,
    body: Body,
    name: &mut &'static str,
) -> Result<Response, ConnectError> {
    let req = read_unary(headers, body, state.limits).await?;
    let call = match req.codec {
        Codec::Json => parse_json(&req.body)?,
        Codec::Proto => parse_proto(&req.body)?,
    };
    *name = call.name();
    let fut = state.store.call(ns, call);
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

fn parse_json(body: &[u8]) -> Result<StoreCall, ConnectError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ConnectError::invalid_argument("request body is not valid UTF-8"))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    if !text.trim_start().starts_with('{') {
        return Err(ConnectError::invalid_argument(
            "request body must be a JSON object (sdk.v1.CallStoreRequest)",
        ));
    }
    if nesting_depth(text.as_bytes()) > MAX_JSON_DEPTH {
        return Err(ConnectError::invalid_argument(format!(
            "request JSON is nested deeper than {MAX_JSON_DEPTH} levels"
        )));
    }
    let req: JsonRequest<'_> = serde_json::from_str(text).map_err(|e| {
        ConnectError::invalid_argument(format!("invalid JSON for sdk.v1.CallStoreRequest: {e}"))
    })?;
    let input = req.input.map_or("{}", |raw| raw.get());
    to_call(req.substore, req.method, input)
}

/// Deepest JSON nesting accepted. Documents are stored as raw text, so without this a
/// payload nested thousands deep would be stored, and then fail to decode in any parser
/// with a recursion limit (serde_json's is 128; the proto codec's reads use it).
const MAX_JSON_DEPTH: usize = 100;

/// The deepest `[`/`{` nesting of JSON text, ignoring brackets inside strings. O(n), no
/// recursion; it does not validate (the parser does that next).
fn nesting_depth(json: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in json {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn parse_proto(body: &[u8]) -> Result<StoreCall, ConnectError> {
    let req = CallStoreRequest::decode(body).map_err(|e| {
        ConnectError::invalid_argument(format!("invalid protobuf for sdk.v1.CallStoreRequest: {e}"))
    })?;
    let input = match &req.input {
        Some(s) => struct_to_json(s)
            .map_err(|e| ConnectError::invalid_argument(format!("invalid input: {e}")))?
            .to_string(),
        None => "{}".to_string(),
    };
    to_call(Some(req.substore), Some(req.method), &input)
}

fn to_call(
    substore: Option<String>,
    method: Option<String>,
    input: &str,
) -> Result<StoreCall, ConnectError> {
    let substore = substore
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ConnectError::invalid_argument("substore is required"))?;
    let method = method
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ConnectError::invalid_argument("method is required"))?;
    if !input.trim_start().starts_with('{') {
        return Err(ConnectError::invalid_argument(
            "input must be a JSON object",
        ));
    }
    Ok(StoreCall::parse(&substore, &method, input)?)
}

fn encode(codec: Codec, output: StoreOutput) -> Result<Response, ConnectError> {
    Ok(match codec {
        Codec::Json => {
            let body = match output {
                Some(json) => {
                    let mut body = String::with_capacity(json.len() + 11);
                    body.push_str(r#"{"output":"#);
                    body.push_str(&json);
                    body.push('}');
                    body
                }
                None => "{}".to_string(),
            };
            unary_response(Codec::Json, body)
        }
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

#[cfg(test)]
mod tests {
    use super::nesting_depth;

    #[test]
    fn nesting_depth_ignores_brackets_in_strings() {
        assert_eq!(nesting_depth(br#"{"a":[1,{"b":"[[[{{"}]}"#), 3);
        assert_eq!(nesting_depth(br#"{"a":"\\\"[["}"#), 1);
        assert_eq!(nesting_depth(b"[[[[]]]]"), 4);
        assert_eq!(nesting_depth(b"1"), 0);
    }
}
