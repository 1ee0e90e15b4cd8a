//! [`Caller`]: who is calling the run API, from the bearer token — its namespace and whether
//! it may write (the API token) or only read (`api.read_token`). The bridge's store and tool
//! tokens are not accepted here, and the API tokens are not accepted by the callbacks.

use axum::extract::FromRequestParts;
use http::header;
use http::request::Parts;

use super::problem::{Problem, ProblemCode};
use super::ApiState;
use crate::auth::{TokenDigest, TokenSet};
use crate::store::Namespace;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Read,
    Write,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
        }
    }
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub ns: Namespace,
    pub role: Role,
    /// The token that granted this, for a long-lived request (a stream) to notice that a
    /// reload revoked it.
    grant: Grant,
}

#[derive(Debug, Clone)]
struct Grant {
    set: TokenSet,
    digest: TokenDigest,
}

impl Caller {
    /// Resolves once the token this caller presented no longer grants its namespace (a
    /// reload removed or rotated it); never, while it does.
    pub async fn revoked(&self) {
        let mut changes = self.grant.set.changes();
        loop {
            if !self.grant.set.still_grants(&self.grant.digest, &self.ns) {
                return;
            }
            if changes.changed().await.is_err() {
                // The set is gone with the daemon: nothing will revoke this any more.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The digest of the API token this caller presented (stream tokens are signed with a
    /// key derived from it).
    pub fn grant_digest(&self) -> &TokenDigest {
        &self.grant.digest
    }

    /// `403 permission_denied` unless the caller may write.
    pub fn require_write(&self, what: &str) -> Result<(), Problem> {
        match self.role {
            Role::Write => Ok(()),
            Role::Read => Err(Problem::new(
                ProblemCode::PermissionDenied,
                format!("the read-only API token cannot {what}; use the API token (api_token)"),
            )),
        }
    }
}

/// The tokens the API accepts, and the ones it recognises only to say they are the wrong
/// kind.
#[derive(Clone, Debug)]
pub struct ApiTokens {
    pub write: TokenSet,
    pub read: TokenSet,
    /// The bridge's store and tool tokens: refused, with a message that says why.
    pub bridge: TokenSet,
}

impl ApiTokens {
    pub fn authorize(&self, parts: &Parts) -> Result<Caller, Problem> {
        let mut values = parts.headers.get_all(header::AUTHORIZATION).iter();
        let Some(value) = values.next() else {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "missing Authorization header: send `Authorization: Bearer <api token>` \
                 (api_token in the tokens file, CALLBACKD_API_TOKEN or api.token)",
            ));
        };
        if values.next().is_some() {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "more than one Authorization header",
            ));
        }
        let presented = Some(value.as_bytes());
        if !value.as_bytes().starts_with(b"Bearer ") {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "the Authorization header must be `Bearer <api token>`",
            ));
        }
        for (set, role) in [(&self.write, Role::Write), (&self.read, Role::Read)] {
            if let Some((ns, digest)) = set.grant(presented) {
                return Ok(Caller {
                    ns,
                    role,
                    grant: Grant {
                        set: set.clone(),
                        digest,
                    },
                });
            }
        }
        if value
            .as_bytes()
            .strip_prefix(b"Bearer ")
            .is_some_and(super::stream_token::looks_like)
        {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "that is a stream token: it is accepted only as ?access_token= on GET \
                 /v1/runs/{run_id}/stream",
            ));
        }
        if self.bridge.authorize(presented).is_some() {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "that is one of the bridge's callback tokens; the run API takes the API token \
                 (api_token in the tokens file, CALLBACKD_API_TOKEN or api.token)",
            ));
        }
        Err(Problem::new(
            ProblemCode::Unauthenticated,
            "the bearer token is not valid for the run API",
        ))
    }
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Problem> {
        match access_token(&parts.uri) {
            Some(token) => state.tokens().authorize_stream(parts, &token),
            None => state.tokens().authorize(parts),
        }
    }
}

/// The `access_token` of a request's query string, if it has one.
fn access_token(uri: &http::Uri) -> Option<String> {
    let q = uri.query()?;
    if !q.contains("access_token") {
        return None;
    }
    super::query(uri).ok()?.remove("access_token")
}

/// The run of `GET /v1/runs/{run_id}/stream`, the one request a stream token opens.
fn stream_run(parts: &Parts) -> Option<String> {
    if parts.method != http::Method::GET {
        return None;
    }
    let rest = parts.uri.path().strip_prefix("/v1/runs/")?;
    let (id, tail) = rest.split_once('/')?;
    (tail == "stream" && !id.is_empty())
        .then(|| super::percent_decode(id).ok())
        .flatten()
}

impl ApiTokens {
    /// A request with `?access_token=`: a stream token, accepted only on its run's stream,
    /// read-only, and never beside an `Authorization` header.
    pub fn authorize_stream(&self, parts: &Parts, token: &str) -> Result<Caller, Problem> {
        let Some(run_id) = stream_run(parts) else {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "access_token (a stream token) is accepted only on GET \
                 /v1/runs/{run_id}/stream; send `Authorization: Bearer <api token>` here",
            ));
        };
        if parts.headers.contains_key(header::AUTHORIZATION) {
            return Err(Problem::new(
                ProblemCode::Unauthenticated,
                "send either an Authorization header or ?access_token=, not both",
            ));
        }
        let keys = |ns: &str| {
            let ns = Namespace::new(ns);
            let mut keys = self.write.digests_of(&ns);
            keys.extend(self.read.digests_of(&ns));
            keys
        };
        let (claims, digest) =
            super::stream_token::verify(token, &run_id, crate::clock::now_ms(), keys)?;
        let ns = Namespace::new(&claims.ns);
        let set = if self.write.still_grants(&digest, &ns) {
            self.write.clone()
        } else {
            self.read.clone()
        };
        Ok(Caller {
            ns,
            role: Role::Read,
            grant: Grant { set, digest },
        })
    }
}
