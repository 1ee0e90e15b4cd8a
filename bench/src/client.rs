//! The load generator's HTTP side: one keep-alive HTTP/1.1 connection per simulated client,
//! requests shaped like the bridge's (connect-es headers, chunked body without a length).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Where a store callback server is and how to call it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    host: HeaderValue,
    path: Uri,
    auth: HeaderValue,
}

const STORE_PATH: &str = "sdk.v1.SdkStoreCallbackService/CallStore";

impl Endpoint {
    /// `url` is a base URL as the bridge takes it (`http://127.0.0.1:PORT/`, an optional path
    /// prefix allowed); only plain `http` is supported.
    pub fn new(url: &str, token: &str) -> anyhow::Result<Endpoint> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("only http:// URLs are supported, got {url:?}"))?;
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
            .with_context(|| format!("resolving {authority}"))?
            .next()
            .ok_or_else(|| anyhow!("{authority} resolves to no address"))?;
        let prefix = prefix.trim_end_matches('/');
        let path = if prefix.is_empty() {
            format!("/{STORE_PATH}")
        } else {
            format!("/{prefix}/{STORE_PATH}")
        };
        Ok(Endpoint {
            addr,
            host: HeaderValue::from_str(authority)?,
            path: path.parse()?,
            auth: bearer(token)?,
        })
    }
}

/// The `Authorization` value for `token`.
pub fn bearer(token: &str) -> anyhow::Result<HeaderValue> {
    Ok(HeaderValue::from_str(&format!("Bearer {token}"))?)
}

/// A request body sent as one chunk of unknown length, so hyper frames it with
/// `Transfer-Encoding: chunked` exactly as the bridge does.
pub struct OneChunk(Option<Bytes>);

impl Body for OneChunk {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
}

/// One keep-alive connection.
pub struct Conn {
    ep: Arc<Endpoint>,
    sender: SendRequest<OneChunk>,
}

impl Conn {
    pub async fn connect(ep: Arc<Endpoint>) -> anyhow::Result<Conn> {
        let sender = handshake(&ep).await?;
        Ok(Conn { ep, sender })
    }

    /// Sends one CallStore with `body` and reads the whole answer.
    pub async fn call(&mut self, body: Bytes) -> anyhow::Result<(StatusCode, Bytes)> {
        self.call_as(body, None).await
    }

    /// [`Conn::call`] with `auth` (a [`bearer`] value) instead of the endpoint's token: one
    /// connection can speak for several namespaces of one daemon.
    pub async fn call_as(
        &mut self,
        body: Bytes,
        auth: Option<&HeaderValue>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let ep = &self.ep;
        let mut req = Request::new(OneChunk(Some(body)));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = ep.path.clone();
        let h = req.headers_mut();
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip,br"));
        h.insert(header::AUTHORIZATION, auth.unwrap_or(&ep.auth).clone());
        h.insert("connect-protocol-version", HeaderValue::from_static("1"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("connect-es/1.6.1"),
        );
        h.insert(header::HOST, ep.host.clone());
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        if resp.headers().contains_key(header::CONTENT_ENCODING) {
            bail!("the server compressed its answer; the bench does not decode that");
        }
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// Latencies and failures of one client (merged per phase).
#[derive(Default)]
pub struct Recorder {
    /// Nanoseconds per call.
    pub latencies: Vec<u64>,
    /// Transport failures and non-200 answers.
    pub errors: u64,
    /// Answers that were 200 but wrong.
    pub wrong: u64,
    pub examples: Vec<String>,
}

impl Recorder {
    /// Times one call; `Some(body)` on a 200, `None` (recorded as an error) otherwise.
    pub async fn call(&mut self, conn: &mut Conn, body: String) -> Option<Bytes> {
        self.call_as(conn, body, None).await
    }

    /// [`Recorder::call`] with another token ([`Conn::call_as`]).
    pub async fn call_as(
        &mut self,
        conn: &mut Conn,
        body: String,
        auth: Option<&HeaderValue>,
    ) -> Option<Bytes> {
        let started = Instant::now();
        let result = conn.call_as(Bytes::from(body), auth).await;
        self.latencies.push(started.elapsed().as_nanos() as u64);
        match result {
            Ok((StatusCode::OK, body)) => Some(body),
            Ok((status, body)) => {
                self.error(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ));
                None
            }
            Err(e) => {
                self.error(format!("transport: {e:#}"));
                None
            }
        }
    }

    pub fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.examples.len() < 3 {
            self.examples.push(msg);
        }
    }

    /// Records a failed check of a 200 answer.
    pub fn wrong(&mut self, msg: String) {
        self.wrong += 1;
        if self.examples.len() < 3 {
            self.examples.push(format!("wrong answer: {msg}"));
        }
    }

    pub fn merge(&mut self, other: Recorder) {
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        self.wrong += other.wrong;
        for e in other.examples {
            if self.examples.len() < 3 {
                self.examples.push(e);
            }
        }
    }
}

/// One keep-alive connection to the run API (`GET /v1/...` with a bearer token), for the
/// workloads that read what people read rather than what the bridge calls.
pub struct ApiConn {
    host: HeaderValue,
    auth: HeaderValue,
    sender: SendRequest<http_body_util::Empty<Bytes>>,
}

impl ApiConn {
    pub async fn connect(ep: &Endpoint, token: &str) -> anyhow::Result<ApiConn> {
        let sender = handshake(ep).await?;
        Ok(ApiConn {
            host: ep.host.clone(),
            auth: bearer(token)?,
            sender,
        })
    }

    /// `GET path_and_query`; the status and the whole body.
    pub async fn get(&mut self, path_and_query: &str) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut req = Request::new(http_body_util::Empty::new());
        *req.uri_mut() = path_and_query.parse()?;
        let h = req.headers_mut();
        h.insert(header::AUTHORIZATION, self.auth.clone());
        h.insert(header::HOST, self.host.clone());
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// One keep-alive HTTP/1.1 connection to `ep` (no Nagle delay), its driver spawned.
async fn handshake<B>(ep: &Endpoint) -> anyhow::Result<SendRequest<B>>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(ep.addr)
        .await
        .with_context(|| format!("connecting to {}", ep.addr))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}
