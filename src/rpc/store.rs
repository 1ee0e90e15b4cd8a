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
    let req: JsonRequest<'_> = serde_json::from_str(text).map_err(|e| {
        ConnectError::invalid_argument(format!("invalid JSON for sdk.v1.CallStoreRequest: {e}"))
    })?;
    let input = req.input.map_or("{}", |raw| raw.get());
    to_call(req.substore, req.method, input)
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
