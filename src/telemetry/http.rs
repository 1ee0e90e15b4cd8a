//! The OTLP exporter's HTTP client: one HTTP/1.1 request per export over hyper, which the
//! daemon already builds (`outbound`). `opentelemetry-otlp`'s own clients are reqwest (with its TLS
//! stack, twice the crates of everything else here) or a hyper-util legacy client; this is
//! the few lines it takes on what is in the tree. Plain `http://` only (docs/telemetry.md:
//! TLS belongs to a collector or sidecar next to callbackd).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{Request, Response};
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
    crate::outbound::send(request, MAX_RESPONSE_BYTES).await
}
