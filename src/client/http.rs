//! A small HTTP/1.1 client of the run API on hyper's own client connection: one connection
//! per request (the follower holds one stream at a time; the listings make a few calls).

use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use serde_json::Value;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call did not give an answer to use.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid URL {url:?}: {why}")]
    BadUrl { url: String, why: &'static str },
    #[error("cannot connect to callbackd at {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("the connection to callbackd failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("callbackd did not answer within {0:?}")]
    Timeout(Duration),
    /// A problem+json answer (run-api.md §4), or a non-JSON error.
    #[error("{detail} (HTTP {status}{})", code.as_deref().map(|c| format!(", {c}")).unwrap_or_default())]
    Api {
        status: u16,
        code: Option<String>,
        detail: String,
    },
    #[error("unexpected answer from callbackd: {0}")]
    Protocol(String),
}

impl ClientError {
    /// Worth retrying: the daemon is away (restarting, overloaded), not refusing us.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Connect { .. } | ClientError::Http(_) | ClientError::Timeout(_) => true,
            ClientError::Api { status, .. } => *status >= 500 || *status == 429,
            ClientError::BadUrl { .. } | ClientError::Protocol(_) => false,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Where the API is and the token to present.
#[derive(Clone)]
pub struct ApiClient {
    host: String,
    port: u16,
    /// A path prefix in front of `/v1` (empty unless callbackd sits behind a proxy path).
    prefix: String,
    token: String,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

/// An opened stream request.
pub enum StreamAnswer {
    /// `200 text/event-stream`: read the body.
    Events(Incoming),
    /// `204`: a terminal run with nothing after the position asked for.
    NothingMore,
}

impl ApiClient {
    /// `url` is the daemon's base URL, as the ready line's `url` or `api_url` print it:
    /// `http://HOST:PORT`, with or without a trailing `/` or `/v1`.
    pub fn new(url: &str, token: impl Into<String>) -> Result<ApiClient, ClientError> {
        let bad = |why| ClientError::BadUrl {
            url: url.to_string(),
            why,
        };
        let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(_) => {
                return Err(bad(
                    "only http:// is supported (callbackd serves plain HTTP)",
                ))
            }
            None => return Err(bad("give it as http://HOST:PORT")),
        }
        let auth = uri.authority().ok_or_else(|| bad("no host"))?;
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let port = auth.port_u16().unwrap_or(80);
        let mut prefix = uri.path().trim_end_matches('/').to_string();
        if let Some(p) = prefix.strip_suffix("/v1") {
            prefix = p.to_string();
        }
        Ok(ApiClient {
            host: host.to_string(),
            port,
            prefix,
            token: token.into(),
        })
    }

    pub fn url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}{}", self.port, self.prefix)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        accept: &str,
    ) -> Result<hyper::Response<Incoming>, ClientError> {
        let addr = format!("{}:{}", self.host, self.port);
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .map_err(|_| ClientError::Timeout(CONNECT_TIMEOUT))?
        .map_err(|source| ClientError::Connect {
            addr: addr.clone(),
            source,
        })?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Its error, if any, is the response's or the body's error too.
            let _ = conn.await;
        });
        let builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(header::HOST, &addr)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::ACCEPT, accept)
            .header(
                header::USER_AGENT,
                concat!("callbackd/", env!("CARGO_PKG_VERSION")),
            );
        let req = match body {
            Some(v) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(v.to_string())).boxed()),
            None => builder.body(Empty::<Bytes>::new().map_err(|n| match n {}).boxed()),
        }
        .map_err(|e| ClientError::Protocol(format!("cannot build the request: {e}")))?;
        Ok(
            tokio::time::timeout(ANSWER_TIMEOUT, sender.send_request(req))
                .await
                .map_err(|_| ClientError::Timeout(ANSWER_TIMEOUT))??,
        )
    }

    /// A JSON call that must answer 2xx.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let resp = self.send(method, path, body, "application/json").await?;
        let status = resp.status();
        let bytes = tokio::time::timeout(ANSWER_TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| ClientError::Timeout(ANSWER_TIMEOUT))??
            .to_bytes();
        if !status.is_success() {
            return Err(problem(status, &bytes));
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::Protocol(format!("{path} answered invalid JSON: {e}")))
    }

    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.json(Method::GET, path, None).await
    }

    /// Opens `GET path` as an event stream.
    pub async fn stream(&self, path: &str) -> Result<StreamAnswer, ClientError> {
        let resp = self
            .send(Method::GET, path, None, "text/event-stream")
            .await?;
        let status = resp.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(StreamAnswer::NothingMore);
        }
        if !status.is_success() {
            let bytes = tokio::time::timeout(ANSWER_TIMEOUT, resp.into_body().collect())
                .await
                .map_err(|_| ClientError::Timeout(ANSWER_TIMEOUT))??
                .to_bytes();
            return Err(problem(status, &bytes));
        }
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !ct.starts_with("text/event-stream") {
            return Err(ClientError::Protocol(format!(
                "{path} answered {ct:?}, not text/event-stream"
            )));
        }
        Ok(StreamAnswer::Events(resp.into_body()))
    }
}

/// The error of a non-2xx answer: its problem details when it has them.
fn problem(status: StatusCode, body: &[u8]) -> ClientError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| {
        json.as_ref()
            .and_then(|j| j.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let detail = field("detail")
        .or_else(|| field("title"))
        .or_else(|| field("message"))
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                status.canonical_reason().unwrap_or("error").to_string()
            } else {
                text.chars().take(300).collect()
            }
        });
    ClientError::Api {
        status: status.as_u16(),
        code: field("code"),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_the_ready_line_prints_them() {
        for (url, want) in [
            ("http://127.0.0.1:7420/", "http://127.0.0.1:7420"),
            ("http://127.0.0.1:7420", "http://127.0.0.1:7420"),
            ("http://127.0.0.1:7420/v1", "http://127.0.0.1:7420"),
            ("http://[::1]:9/v1/", "http://[::1]:9"),
            ("http://h:1/proxy/v1", "http://h:1/proxy"),
        ] {
            assert_eq!(ApiClient::new(url, "t").unwrap().url(), want, "{url}");
        }
        for url in ["https://h:1/", "127.0.0.1:7420", "not a url", "http:///x"] {
            assert!(
                matches!(ApiClient::new(url, "t"), Err(ClientError::BadUrl { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn problem_details_become_the_message() {
        let e = problem(
            StatusCode::UNAUTHORIZED,
            br#"{"type":"about:blank","title":"Unauthorized","status":401,"detail":"wrong token","code":"unauthenticated"}"#,
        );
        assert_eq!(e.to_string(), "wrong token (HTTP 401, unauthenticated)");
        assert!(!e.is_transient());
        let e = problem(StatusCode::SERVICE_UNAVAILABLE, b"");
        assert!(e.is_transient());
        assert_eq!(e.to_string(), "Service Unavailable (HTTP 503)");
    }
}
