//! List cursors, in the formats the reference stores use (contract §2.3). They are opaque to
//! the bridge, which hands them back verbatim; we decode them strictly and answer a clear
//! error for anything we did not produce.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::StoreError;

/// Position after the last item of an `agents.list` page (sorted `updatedAt` desc, then
/// `agentId` desc): base64url of `{"updatedAt":n,"agentId":s}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCursor {
    #[serde(rename = "updatedAt", with = "json_number")]
    pub updated_at: f64,
    #[serde(rename = "agentId")]
    pub agent_id: String,
}

/// Position after the last item of a `runs.list` page (sorted `turnNumber` asc, then `runId`
/// asc): base64url of `{"turnNumber":n,"runId":s}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCursor {
    #[serde(rename = "turnNumber", with = "json_number")]
    pub turn_number: f64,
    #[serde(rename = "runId")]
    pub run_id: String,
}

impl AgentCursor {
    pub fn encode(&self) -> String {
        encode(self)
    }

    pub fn decode(s: &str) -> Result<Self, StoreError> {
        decode(s).ok_or_else(|| StoreError::invalid(format!("invalid agent list cursor {s:?}")))
    }
}

impl RunCursor {
    pub fn encode(&self) -> String {
        encode(self)
    }

    pub fn decode(s: &str) -> Result<Self, StoreError> {
        decode(s).ok_or_else(|| StoreError::invalid(format!("invalid run list cursor {s:?}")))
    }
}

fn encode<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).expect("cursor serialises"))
}

fn decode<T: for<'de> Deserialize<'de>>(s: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Numbers in cursors are written as integers when they are integral (timestamps and turn
/// numbers always are), matching what JavaScript's `JSON.stringify` produces.
mod json_number {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
            s.serialize_i64(*v as i64)
        } else {
            s.serialize_f64(*v)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        f64::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_cursor_is_base64url_of_the_reference_json() {
        let c = AgentCursor {
            updated_at: 1_780_000_000_123.0,
            agent_id: "agent-1".into(),
        };
        let s = c.encode();
        let json = URL_SAFE_NO_PAD.decode(&s).unwrap();
        assert_eq!(
            std::str::from_utf8(&json).unwrap(),
            r#"{"updatedAt":1780000000123,"agentId":"agent-1"}"#
        );
        assert_eq!(AgentCursor::decode(&s).unwrap(), c);
    }

    #[test]
    fn non_integral_and_huge_keys_round_trip_exactly() {
        // Found by tests/api/decode_props.rs: without serde_json's float_roundtrip these
        // came back one ulp off, so keyset pagination would compare against another key.
        for key in [
            1_018_144_537_151_411_009.0,
            0.1 + 0.2,
            1.780_000_000_000_5e12,
            -1e-300,
        ] {
            let c = AgentCursor {
                updated_at: key,
                agent_id: "a".into(),
            };
            assert_eq!(AgentCursor::decode(&c.encode()).unwrap().updated_at, key);
        }
    }

    #[test]
    fn garbage_cursors_are_invalid() {
        for bad in ["!!", "e30", "bm90IGpzb24", "eyJydW5JZCI6MX0"] {
            assert!(AgentCursor::decode(bad).is_err(), "{bad}");
            assert!(RunCursor::decode(bad).is_err(), "{bad}");
        }
    }
}
