//! One plain `http://` request over hyper, which the daemon already builds: what the OTLP
//! exporter (`telemetry`) and the webhooks' deliveries send. One connection per request, no
//! pool (both send a few requests a second at most), no redirects followed (the answer is
//! handed back as it is), no TLS (docs/telemetry.md, docs/webhooks.md: TLS belongs to a
//! proxy next to callbackd).

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

/// Why a request got no answer.
pub type SendError = Box<dyn std::error::Error + Send + Sync>;

/// Sends `request` to the `http://` host and port of its URI; the answer, its body read up
/// to `max_answer_bytes`.
pub async fn send(
    request: Request<Bytes>,
    max_answer_bytes: usize,
) -> Result<Response<Bytes>, SendError> {
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
            let bytes = Limited::new(body, max_answer_bytes)
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
