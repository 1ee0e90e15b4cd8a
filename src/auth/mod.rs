//! Bearer-token authentication as a tower layer.
//!
//! Each service (store, tools) is wrapped in its own [`BearerAuthLayer`] holding that
//! service's tokens, so a store token is refused on the tool service and vice versa. A token
//! maps to the [`Namespace`](crate::store::Namespace) its bridge's data lives in; the layer
//! puts that namespace into the request's extensions for the handler.

mod layer;
mod refusals;
mod service;

pub use layer::BearerAuthLayer;
pub use refusals::{refused, refused_total};
pub use service::BearerAuth;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::secret::Secret;
use crate::store::Namespace;

/// The SHA-256 of a token: what a [`TokenSet`] keeps and compares. Comparing digests in
/// variable time tells an attacker nothing about a token, and any number of tokens costs one
/// hash map probe, so a daemon with hundreds of namespaces authenticates as fast as with one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub fn of(token: &[u8]) -> Self {
        TokenDigest(Sha256::digest(token).into())
    }

    /// The digest's bytes (a key derived from them signs the run API's stream tokens).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(***)")
    }
}

/// The tokens one service accepts, each with the namespace it grants. Shared: every clone
/// sees a [`replace`](TokenSet::replace) at once (a reload rotates tokens without a restart).
#[derive(Clone)]
pub struct TokenSet {
    inner: Arc<Inner>,
}

struct Inner {
    map: RwLock<Arc<HashMap<TokenDigest, Namespace>>>,
    /// Bumped by every replace, for holders of long-lived grants (streams) to re-check.
    generation: watch::Sender<u64>,
}

impl TokenSet {
    pub fn new(entries: Vec<(Secret, Namespace)>) -> Self {
        TokenSet {
            inner: Arc::new(Inner {
                map: RwLock::new(Arc::new(Self::map(entries))),
                generation: watch::Sender::new(0),
            }),
        }
    }

    fn map(entries: Vec<(Secret, Namespace)>) -> HashMap<TokenDigest, Namespace> {
        entries
            .into_iter()
            .map(|(t, ns)| (TokenDigest::of(t.expose().as_bytes()), ns))
            .collect()
    }

    /// A set with one token for the default namespace.
    pub fn single(token: Secret) -> Self {
        Self::new(vec![(token, Namespace::default())])
    }

    /// From now on, only `entries` are accepted.
    pub fn replace(&self, entries: Vec<(Secret, Namespace)>) {
        let map = Arc::new(Self::map(entries));
        *self.inner.map.write().unwrap_or_else(|p| p.into_inner()) = map;
        self.inner.generation.send_modify(|g| *g += 1);
    }

    fn current(&self) -> Arc<HashMap<TokenDigest, Namespace>> {
        self.inner
            .map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The namespace of the token in an `Authorization` header value, if it is one of ours.
    pub fn authorize(&self, header: Option<&[u8]>) -> Option<Namespace> {
        self.grant(header).map(|(ns, _)| ns)
    }

    /// [`authorize`](Self::authorize), with the token's digest, to [`still_grants`] later.
    ///
    /// [`still_grants`]: Self::still_grants
    pub fn grant(&self, header: Option<&[u8]>) -> Option<(Namespace, TokenDigest)> {
        let presented = header?.strip_prefix(b"Bearer ")?;
        if presented.is_empty() {
            return None;
        }
        let digest = TokenDigest::of(presented);
        self.current().get(&digest).map(|ns| (ns.clone(), digest))
    }

    /// Whether the token of `digest` still grants `ns` (after a reload).
    pub fn still_grants(&self, digest: &TokenDigest, ns: &Namespace) -> bool {
        self.current().get(digest) == Some(ns)
    }

    /// The digests of the tokens that grant `ns` now.
    pub fn digests_of(&self, ns: &Namespace) -> Vec<TokenDigest> {
        self.current()
            .iter()
            .filter(|(_, n)| *n == ns)
            .map(|(d, _)| *d)
            .collect()
    }

    /// Changes with every [`replace`](Self::replace).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    pub fn len(&self) -> usize {
        self.current().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSet({} tokens)", self.len())
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

    #[test]
    fn a_replaced_token_stops_working_in_every_clone() {
        let set = TokenSet::new(vec![(Secret::new("old".into()), Namespace::new("a"))]);
        let clone = set.clone();
        let (ns, digest) = clone.grant(Some(b"Bearer old")).unwrap();
        assert_eq!(ns.as_str(), "a");
        let changes = clone.changes();
        set.replace(vec![(Secret::new("new".into()), Namespace::new("a"))]);
        assert!(changes.has_changed().unwrap());
        assert!(clone.authorize(Some(b"Bearer old")).is_none());
        assert!(!clone.still_grants(&digest, &ns));
        assert_eq!(clone.authorize(Some(b"Bearer new")), Some(ns));
    }
}
