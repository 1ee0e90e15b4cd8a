//! [`BearerAuthLayer`]: wraps a service in a [`BearerAuth`] check.

use tower::Layer;

use super::{BearerAuth, TokenSet};

/// A layer that only lets requests through whose bearer token is in the set.
#[derive(Clone, Debug)]
pub struct BearerAuthLayer {
    tokens: TokenSet,
    service: &'static str,
}

impl BearerAuthLayer {
    /// `service` names the protected service in logs ("store", "tools").
    pub fn new(tokens: TokenSet, service: &'static str) -> Self {
        BearerAuthLayer { tokens, service }
    }
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BearerAuth::new(inner, self.tokens.clone(), self.service)
    }
}
