//! Bearer-token authentication as a tower layer.
//!
//! Each service (store, tools) is wrapped in its own [`BearerAuthLayer`] holding that
//! service's tokens, so a store token is refused on the tool service and vice versa. A token
//! maps to the [`Namespace`](crate::store::Namespace) its bridge's data lives in; the layer
//! puts that namespace into the request's extensions for the handler.

mod layer;
mod service;

pub use layer::BearerAuthLayer;
pub use service::BearerAuth;

use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::secret::Secret;
use crate::store::Namespace;

/// The tokens one service accepts, each with the namespace it grants.
#[derive(Clone)]
pub struct TokenSet {
    entries: Arc<[(Secret, Namespace)]>,
}

impl TokenSet {
    pub fn new(entries: Vec<(Secret, Namespace)>) -> Self {
        TokenSet {
            entries: entries.into(),
        }
    }

    /// A set with one token for the default namespace.
    pub fn single(token: Secret) -> Self {
        Self::new(vec![(token, Namespace::default())])
    }

    /// The namespace of the token in an `Authorization` header value, if it is one of ours.
    ///
    /// Every configured token is compared, each in constant time, so the time taken does not
    /// depend on which token (or which prefix) matched.
    pub fn authorize(&self, header: Option<&[u8]>) -> Option<Namespace> {
        let presented = header?.strip_prefix(b"Bearer ")?;
        let mut found = None;
        for (token, ns) in self.entries.iter() {
            if bool::from(token.expose().as_bytes().ct_eq(presented)) {
                found = Some(ns.clone());
            }
        }
        found
    }
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSet({} tokens)", self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exact_bearer_token_is_authorized() {
        let set = TokenSet::single(Secret::new("s3cret-token".into()));
        assert!(set.authorize(Some(b"Bearer s3cret-token")).is_some());
        assert!(set.authorize(Some(b"Bearer s3cret-toke")).is_none());
        assert!(set.authorize(Some(b"Bearer s3cret-token2")).is_none());
        assert!(set.authorize(Some(b"bearer s3cret-token")).is_none());
        assert!(set.authorize(Some(b"s3cret-token")).is_none());
        assert!(set.authorize(Some(b"Bearer ")).is_none());
        assert!(set.authorize(None).is_none());
    }
}
