//! The OTLP exporter's HTTP client: one HTTP/1.1 request per export over hyper, which the
//! daemon already builds. `opentelemetry-otlp`'s own clients are reqwest (with its TLS
//! stack, twice the crates of everything else here) or a hyper-util legacy client; this is
//! the few lines it takes on what is in the tree. Plain `http://` only (docs/telemetry.md:
//! TLS belongs to a collector or sidecar next to callbackd).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_http::{HttpClient, HttpError};

/// Bytes of a collector's answer read at most (an OTLP answer is a few bytes).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct HyperClient;

type Answer<'a> = Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'a>>;

impl HttpClient for HyperClient {
    fn send_bytes<'a, 'b>(&'a self, request: Request<Bytes>) -> Answer<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(send(request))
    }
}

async fn send(request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let (mut parts, body) = request.into_parts();
    let uri = parts.uri.clone();
    if uri.scheme_str() != Some("http") {
        return Err(format!("{uri}: only http:// endpoints are supported").into());
    }
    let host = uri.host().ok_or("the endpoint has no host")?.to_string();
    let port = uri.port_u16().unwrap_or(80);
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let conn = tokio::spawn(conn);
    parts.uri = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .parse()?;
    parts.headers.insert(http::header::HOST, authority.parse()?);
    let answer = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await;
    let result = match answer {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let bytes = Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok(Response::from_parts(parts, bytes))
        }
        Err(e) => Err(e.into()),
    };
    conn.abort();
    result
}
