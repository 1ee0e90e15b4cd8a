//! A Connect client for JSON calls over HTTP/1.1: unary (`application/json`) and server
//! streaming (`application/connect+json`, enveloped messages ending with an end-of-stream
//! frame). What the run API needs to drive the bridge on loopback: one connection per call,
//! no pooling, no TLS.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::net::TcpStream;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached or the connection broke.
    #[error("cannot reach {url}: {reason}")]
    Transport { url: String, reason: String },
    /// The server answered a Connect error.
    #[error("[{code}] {message}")]
    Status { code: String, message: String },
    /// The server answered something that is not Connect.
    #[error("unexpected answer from {url}: {reason}")]
    Protocol { url: String, reason: String },
}

impl ClientError {
    pub fn code(&self) -> &str {
        match self {
            ClientError::Status { code, .. } => code,
            ClientError::Transport { .. } => "unavailable",
            ClientError::Protocol { .. } => "unknown",
        }
    }

    pub fn message(&self) -> String {
        match self {
            ClientError::Status { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// A Connect server at `http://host:port`.
#[derive(Debug, Clone)]
pub struct ConnectClient {
    url: String,
    authority: String,
    token: Option<String>,
    timeout: Duration,
}

impl ConnectClient {
    /// `url` must be `http://HOST:PORT` (a trailing `/` is fine).
    pub fn new(url: &str, token: Option<String>) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("bridge URL {url:?} must start with http://"))?;
        let authority = rest.trim_end_matches('/').to_string();
        if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
            return Err(format!("bridge URL {url:?} must be http://HOST:PORT"));
        }
        Ok(ConnectClient {
            url: url.trim_end_matches('/').to_string(),
            authority,
            token,
            timeout: Duration::from_secs(30),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn transport(&self, reason: impl std::fmt::Display) -> ClientError {
        ClientError::Transport {
            url: self.url.clone(),
            reason: reason.to_string(),
        }
    }

    async fn send(
        &self,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<http::Response<Incoming>, ClientError> {
        let stream = tokio::time::timeout(self.timeout, TcpStream::connect(&self.authority))
            .await
            .map_err(|_| self.transport("connect timed out"))?
            .map_err(|e| self.transport(e))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| self.transport(e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = http::Request::post(path)
            .header(http::header::HOST, &self.authority)
            .header(http::header::CONTENT_TYPE, content_type)
            .header("connect-protocol-version", "1");
        if let Some(token) = &self.token {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req.body(Full::new(body)).map_err(|e| self.transport(e))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| self.transport(e))
    }

    /// A unary call with a JSON body; the JSON answer.
    pub async fn unary(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let call = async {
            let resp = self
                .send(path, "application/json", Bytes::from(body.to_string()))
                .await?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| self.transport(e))?
                .to_bytes();
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if status.is_success() {
                Ok(value)
            } else {
                Err(status_error(&value, status.as_u16()))
            }
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.transport("the call timed out"))?
    }

    /// Starts a server-streaming call; read its messages from the returned stream.
    pub async fn stream(&self, path: &str, body: &Value) -> Result<MessageStream, ClientError> {
        let payload = body.to_string();
        let mut framed = BytesMut::with_capacity(payload.len() + 5);
        framed.extend_from_slice(&[0]);
        framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        framed.extend_from_slice(payload.as_bytes());
        let resp = tokio::time::timeout(
            self.timeout,
            self.send(path, "application/connect+json", framed.freeze()),
        )
        .await
        .map_err(|_| self.transport("the call timed out"))??;
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            return Err(status_error(&value, status.as_u16()));
        }
        Ok(MessageStream {
            url: self.url.clone(),
            body: resp.into_body(),
            buf: BytesMut::new(),
            done: false,
        })
    }
}

fn status_error(value: &Value, http_status: u16) -> ClientError {
    ClientError::Status {
        code: value
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        message: value
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {http_status}"), str::to_string),
    }
}

/// The messages of a server-streaming call.
pub struct MessageStream {
    url: String,
    body: Incoming,
    buf: BytesMut,
    done: bool,
}

impl MessageStream {
    /// The next message; `Ok(None)` after a clean end of stream; `Err` for an error end or
    /// a broken connection.
    pub async fn next(&mut self) -> Result<Option<Value>, ClientError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.buf.len() >= 5 {
                let flags = self.buf[0];
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                if self.buf.len() >= 5 + len {
                    self.buf.advance(5);
                    let data = self.buf.split_to(len);
                    let value: Value =
                        serde_json::from_slice(&data).map_err(|e| ClientError::Protocol {
                            url: self.url.clone(),
                            reason: format!("a stream message is not JSON: {e}"),
                        })?;
                    if flags & 2 != 0 {
                        self.done = true;
                        return match value.get("error") {
                            Some(e) if !e.is_null() => Err(status_error(e, 200)),
                            _ => Ok(None),
                        };
                    }
                    return Ok(Some(value));
                }
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    return Err(ClientError::Transport {
                        url: self.url.clone(),
                        reason: e.to_string(),
                    })
                }
                None => {
                    return Err(ClientError::Transport {
                        url: self.url.clone(),
                        reason: "the stream ended without an end-of-stream frame".into(),
                    })
                }
            }
        }
    }
}
