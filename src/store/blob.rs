//! Checkpoint blobs, the same way in every backend: bytes with a CRC32 taken when they are
//! written and verified on every read (the bridge would use corrupted bytes unnoticed), and
//! the `checkpoints.get` output shape.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::StoreError;

/// `checkpoints.get` of a blob that does not exist.
pub const NOT_FOUND: &str = r#"{"found":false}"#;

/// The checksum stored next to `data` (an `INTEGER`/`bigint` column).
pub fn checksum(data: &[u8]) -> i64 {
    i64::from(crc32fast::hash(data))
}

/// `Ok` when `data` still matches the checksum `stored` with it; otherwise `data_loss`
/// naming the blob (and an error line in the log).
pub fn verify(data: &[u8], stored: i64, agent_id: &str, blob_id: &str) -> Result<(), StoreError> {
    if checksum(data) == stored {
        return Ok(());
    }
    tracing::error!(agent_id, blob_id, "checkpoint blob failed its checksum");
    Err(StoreError::DataLoss(format!(
        "checkpoint blob {blob_id} of agent {agent_id} is corrupted (checksum mismatch)"
    )))
}

/// `{"found":true,"data":<base64>}` of verified bytes.
pub fn found(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 4 / 3 + 32);
    out.push_str(r#"{"found":true,"data":""#);
    STANDARD.encode_string(data, &mut out);
    out.push_str("\"}");
    out
}
