//! A test client of the run API: plain requests with the API token, and an SSE reader that
//! parses frames as they arrive and can be dropped mid-stream.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::helpers::{Framing, Resp, TestApp};

/// One parsed SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `id:` (durable events only), `data:` parsed as JSON, and the raw data text.
    Event {
        id: Option<u64>,
        data: Value,
        raw: String,
        retry: Option<u64>,
    },
    Comment(String),
}

/// The durable frames (those with an `id:`), as (seq, raw bytes): what a replay must equal.
pub fn durable(frames: &[Frame]) -> Vec<(u64, String)> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Event {
                id: Some(id), raw, ..
            } => Some((*id, raw.clone())),
            _ => None,
        })
        .collect()
}

impl Frame {
    pub fn data(&self) -> Option<&Value> {
        match self {
            Frame::Event { data, .. } => Some(data),
            Frame::Comment(_) => None,
        }
    }

    pub fn kind(&self) -> &str {
        self.data()
            .and_then(|d| d.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// An open stream.
pub struct Sse {
    pub status: u16,
    pub headers: http::HeaderMap,
    body: Option<Incoming>,
    buf: Vec<u8>,
    pub problem: Option<Value>,
    /// The connection's request half, kept for as long as the body is read.
    _sender: Option<Box<dyn std::any::Any + Send>>,
}

impl Sse {
    /// The next frame; `None` when the stream ended. Panics after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Frame> {
        tokio::time::timeout(timeout, self.next_frame())
            .await
            .unwrap_or_else(|_| panic!("no SSE frame within {timeout:?}"))
    }

    async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = find(&self.buf, b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                return Some(parse(&String::from_utf8(block).expect("utf-8 frame")));
            }
            let body = self.body.as_mut()?;
            match body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                _ => {
                    self.body = None;
                    return None;
                }
            }
        }
    }

    /// Every frame until the stream ends (`timeout` for each).
    pub async fn collect(&mut self, timeout: Duration) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = self.next(timeout).await {
            out.push(f);
        }
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse(block: &str) -> Frame {
    let (mut id, mut data, mut retry, mut comment) = (None, None, None, None);
    for line in block.lines() {
        if let Some(c) = line.strip_prefix(':') {
            comment = Some(c.trim().to_string());
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.parse().expect("numeric id"));
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("retry: ") {
            retry = Some(v.parse().expect("numeric retry"));
        }
    }
    match (data, comment) {
        (Some(raw), _) => Frame::Event {
            id,
            data: serde_json::from_str(&raw).expect("data is JSON"),
            raw,
            retry,
        },
        (None, Some(c)) => Frame::Comment(c),
        (None, None) => panic!("empty SSE frame {block:?}"),
    }
}

impl TestApp {
    /// A run API request with `token` (None: no Authorization header).
    pub async fn api(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> Resp {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("content-type", "application/json")];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        self.request(
            method,
            path,
            &headers,
            body.to_string(),
            Framing::ContentLength,
        )
        .await
    }

    pub async fn api_get(&self, path: &str) -> Resp {
        let token = self.api_token.clone();
        self.api("GET", path, Some(&token), "").await
    }

    /// Opens a stream (GET, or POST with a body) with the API token and extra headers.
    pub async fn sse(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Sse {
        let auth = format!("Bearer {}", self.api_token);
        self.sse_as(method, path, Some(&auth), headers, body).await
    }

    /// [`sse`](Self::sse) with `authorization` as the Authorization header (None: none).
    pub async fn sse_as(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Sse {
        let stream = TcpStream::connect(self.addr).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(conn);
        let mut b = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        if let Some(auth) = authorization {
            b = b.header("authorization", auth);
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = if body.is_empty() {
            b.body(Empty::<Bytes>::new().boxed()).unwrap()
        } else {
            b.header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.to_string())).boxed())
                .unwrap()
        };
        let resp = sender.send_request(req).await.expect("response");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = resp.into_body();
        let mut problem = None;
        if status != 200 {
            let bytes = (&mut body)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            problem = serde_json::from_slice(&bytes).ok();
            return Sse {
                status,
                headers,
                body: None,
                buf: vec![],
                problem,
                _sender: None,
            };
        }
        Sse {
            status,
            headers,
            body: Some(body),
            buf: Vec::new(),
            problem: problem.take(),
            _sender: Some(Box::new(sender)),
        }
    }

    pub async fn stream(&self, run_id: &str, after: Option<u64>) -> Sse {
        let path = match after {
            Some(a) => format!("/v1/runs/{run_id}/stream?after={a}"),
            None => format!("/v1/runs/{run_id}/stream"),
        };
        self.sse("GET", &path, &[], "").await
    }
}
