//! [`BearerAuth`]: the token check in front of one service.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, Either};
use http::{header, Request};
use http_body_util::BodyExt;
use tower::Service;

use super::TokenSet;
use crate::connect::{Code, ConnectError};

/// Answers `401 unauthenticated` unless the request carries one of the set's tokens; on
/// success the token's namespace is added to the request extensions.
#[derive(Clone, Debug)]
pub struct BearerAuth<S> {
    inner: S,
    tokens: TokenSet,
    service: &'static str,
}

impl<S> BearerAuth<S> {
    pub fn new(inner: S, tokens: TokenSet, service: &'static str) -> Self {
        BearerAuth {
            inner,
            tokens,
            service,
        }
    }
}

impl<S> Service<Request<Body>> for BearerAuth<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        // Authorization is a singleton field (RFC 9110): a request carrying two is refused
        // rather than judged by whichever comes first.
        let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
        let header = values.next();
        let presented = match values.next() {
            None => header.map(|v| v.as_bytes()),
            Some(_) => None,
        };
        match self.tokens.authorize(presented) {
            Some(ns) => {
                req.extensions_mut().insert(ns);
                Either::Left(self.inner.call(req))
            }
            None => {
                super::refused(self.service, header.is_some());
                let err =
                    ConnectError::new(Code::Unauthenticated, "missing or invalid bearer token");
                let body = req.into_body();
                Either::Right(Box::pin(async move {
                    drain(body).await;
                    Ok(err.into_response())
                }))
            }
        }
    }
}

/// The most of a refused request's body read before answering, and for how long.
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_millis(100);

/// Reads what a refused request sends right away (a small body, written just after its
/// head), so that its client reads our 401 instead of failing its write with EPIPE when we
/// close a connection with unread body bytes. A client that stalls or sends more is not
/// waited for: a request without a valid token gets no more of the daemon than this.
async fn drain(mut body: Body) {
    let read = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read).await;
}
