//! Stream tokens (run-api.md §10): what lets a browser's native `EventSource`, which cannot
//! send an `Authorization` header, follow one run. `POST /v1/runs/{run_id}/stream-token`
//! (API or read-only token) answers a short-lived, read-only credential that
//! `GET /v1/runs/{run_id}/stream` accepts as `?access_token=`, and nothing else does.
//!
//! A token is `cbst1.<payload>.<mac>` (base64url): the payload names the namespace, the run
//! and the expiry; the MAC is HMAC-SHA256 under a key derived from the digest of the API
//! token that asked for it. Nothing is stored: any daemon that accepts the same API token
//! (several daemons sharing a PostgreSQL database) accepts the stream token, and rotating or
//! removing that API token (a reload) revokes every stream token made with it, and ends the
//! streams opened with them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::problem::{Problem, ProblemCode};
use crate::auth::TokenDigest;
use crate::clock::rfc3339_ms;
use crate::store::Namespace;

const PREFIX: &str = "cbst1.";

/// What a valid token grants.
#[derive(Debug, PartialEq, Eq)]
pub struct Claims {
    pub ns: String,
    pub run_id: String,
    pub expires_ms: i64,
}

/// A new token for `run_id` of `ns`, valid until `expires_ms`, under the key of the API
/// token `digest`.
pub fn issue(digest: &TokenDigest, ns: &Namespace, run_id: &str, expires_ms: i64) -> String {
    let payload = payload(ns.as_str(), run_id, expires_ms);
    let mac = hmac_sha256(&key(digest), payload.as_bytes());
    format!(
        "{PREFIX}{}.{}",
        URL_SAFE_NO_PAD.encode(payload.as_bytes()),
        URL_SAFE_NO_PAD.encode(mac)
    )
}

fn payload(ns: &str, run_id: &str, expires_ms: i64) -> String {
    format!("{ns}\n{run_id}\n{expires_ms}")
}

fn key(digest: &TokenDigest) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"callbackd stream token v1\0");
    h.update(digest.as_bytes());
    h.finalize().into()
}

fn unauthenticated(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::Unauthenticated, detail)
}

/// Whether `text` looks like a stream token (to say so when one is used where it is not
/// accepted).
pub fn looks_like(text: &[u8]) -> bool {
    text.starts_with(PREFIX.as_bytes())
}

/// The token's claims, unverified: which namespace's keys to try.
pub fn parse(token: &str) -> Result<(Claims, Vec<u8>, Vec<u8>), Problem> {
    let forged = || {
        unauthenticated(
            "the access_token is not a stream token this API made (malformed or forged)",
        )
    };
    let rest = token.strip_prefix(PREFIX).ok_or_else(forged)?;
    let (payload, mac) = rest.split_once('.').ok_or_else(forged)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| forged())?;
    let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| forged())?;
    let text = std::str::from_utf8(&payload).map_err(|_| forged())?;
    let mut parts = text.split('\n');
    let (Some(ns), Some(run_id), Some(expires), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(forged());
    };
    let expires_ms = expires.parse().map_err(|_| forged())?;
    let claims = Claims {
        ns: ns.to_string(),
        run_id: run_id.to_string(),
        expires_ms,
    };
    Ok((claims, payload, mac))
}

/// Checks `token` for a stream of `run_id` at `now_ms`: the key that made it (one of
/// `keys`, the digests of the API tokens of the namespace it names), then the run, then the
/// expiry. Returns the claims and the digest of the API token that made it.
pub fn verify(
    token: &str,
    run_id: &str,
    now_ms: i64,
    keys: impl Fn(&str) -> Vec<TokenDigest>,
) -> Result<(Claims, TokenDigest), Problem> {
    let (claims, payload, mac) = parse(token)?;
    let digest = keys(&claims.ns)
        .into_iter()
        .find(|d| bool::from(hmac_sha256(&key(d), &payload).ct_eq(&mac[..])))
        .ok_or_else(|| {
            unauthenticated(
                "the access_token is not valid: forged, or the API token that made it was \
                 rotated or removed; ask POST /v1/runs/{run_id}/stream-token for a new one",
            )
        })?;
    if claims.run_id != run_id {
        return Err(unauthenticated(format!(
            "the access_token belongs to run {:?}, not to run {run_id:?}: a stream token \
             opens only the stream of the run it was made for",
            claims.run_id
        )));
    }
    if claims.expires_ms <= now_ms {
        return Err(unauthenticated(format!(
            "the access_token expired at {}; ask POST /v1/runs/{run_id}/stream-token for a \
             new one",
            rfc3339_ms(claims.expires_ms)
        )));
    }
    Ok((claims, digest))
}

/// HMAC-SHA256 (RFC 2104) with the `sha2` the daemon already has.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1 and 2.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_token_opens_its_run_until_it_expires_and_nothing_else() {
        let ns = Namespace::default();
        let d = TokenDigest::of(b"api-token");
        let other = TokenDigest::of(b"another-token");
        let t = issue(&d, &ns, "r1", 2_000);
        let keys = |n: &str| {
            assert_eq!(n, ns.as_str());
            vec![other, d]
        };
        let (claims, by) = verify(&t, "r1", 1_999, keys).unwrap();
        assert_eq!((claims.run_id.as_str(), by), ("r1", d));
        let e = verify(&t, "r1", 2_000, keys).unwrap_err();
        assert!(e.detail.contains("expired"), "{}", e.detail);
        let e = verify(&t, "r2", 1_000, keys).unwrap_err();
        assert!(e.detail.contains("belongs to run \"r1\""), "{}", e.detail);
        // Made under a key the namespace no longer has (rotated), or forged.
        let e = verify(&t, "r1", 1_000, |_| vec![other]).unwrap_err();
        assert!(e.detail.contains("not valid"), "{}", e.detail);
        let (claims, _, _) = parse(&t).unwrap();
        let forged = format!(
            "{PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode(payload(&claims.ns, "r1", 9_999_999)),
            t.rsplit('.').next().unwrap()
        );
        assert!(verify(&forged, "r1", 1_000, keys).is_err());
        assert!(verify("cbst1.%%%", "r1", 1_000, keys).is_err());
        assert!(verify("nope", "r1", 1_000, keys).is_err());
    }
}
