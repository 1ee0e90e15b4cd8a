//! SQL of the `checkpoints` substore: conversation blobs, stored as bytes with a checksum.

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::{is_constraint, write_page, Conditions};
use crate::store::blob;
use crate::store::json::{json_str, push_json_str};
use crate::store::{CheckpointFilter, Page, StoreError, StoreOutput};

/// `{"found":true,"data":<base64>}` or `{"found":false}`. The bytes are checked against the
/// checksum taken when they were written: the bridge would use corrupted bytes unnoticed.
pub fn get(
    conn: &Connection,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT data, crc32 FROM checkpoints WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3",
    )?;
    let row = stmt
        .query_row(params![ns, agent_id, blob_id], |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?;
    let Some((data, crc)) = row else {
        return Ok(Some(blob::NOT_FOUND.to_string()));
    };
    blob::verify(&data, crc, agent_id, blob_id)?;
    Ok(Some(blob::found(&data)))
}

pub fn create(
    conn: &Connection,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    match stmt.execute(params![ns, agent_id, blob_id, data, blob::checksum(data)]) {
        Ok(_) => Ok(None),
        Err(e) if is_constraint(&e) => Err(StoreError::AlreadyExists(format!(
            "checkpoint blob {blob_id} already exists for agent {agent_id}"
        ))),
        Err(e) => Err(e.into()),
    }
}

pub fn update(
    conn: &Connection,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "UPDATE checkpoints SET data = ?4, crc32 = ?5 WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3",
    )?;
    if stmt.execute(params![ns, agent_id, blob_id, data, blob::checksum(data)])? == 0 {
        return Err(StoreError::NotFound(format!(
            "checkpoint blob {blob_id} not found for agent {agent_id}"
        )));
    }
    Ok(None)
}

/// Idempotent.
pub fn delete(
    conn: &Connection,
    ns: &str,
    filter: &CheckpointFilter,
) -> Result<StoreOutput, StoreError> {
    let c = conditions(ns, filter);
    conn.prepare_cached(&format!("DELETE FROM checkpoints WHERE {}", c.sql()))?
        .execute(rusqlite::params_from_iter(c.params()))?;
    Ok(None)
}

/// Blob ids ascending; the cursor is the raw last id. Ids are listed once even when several
/// agents hold the same blob, so "ids greater than the cursor" never skips one.
pub fn list(
    conn: &Connection,
    ns: &str,
    filter: &CheckpointFilter,
    page: &Page<String>,
) -> Result<StoreOutput, StoreError> {
    let mut c = conditions(ns, filter);
    if let Some(cursor) = &page.cursor {
        c.raw("blob_id > ?", [Value::Text(cursor.clone())]);
    }
    let sql = format!(
        "SELECT DISTINCT blob_id FROM checkpoints WHERE {} ORDER BY blob_id LIMIT {}",
        c.sql(),
        page.limit.saturating_add(1)
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query(rusqlite::params_from_iter(c.params()))?;
    let out = write_page(
        rows,
        page.limit,
        "nextCursor",
        |row, out| {
            push_json_str(out, row.get_ref(0)?.as_str()?);
            Ok(())
        },
        |row| row.get::<_, String>(0),
        |last| json_str(last),
    )?;
    Ok(Some(out))
}

fn conditions(ns: &str, filter: &CheckpointFilter) -> Conditions {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("blob_id", filter.blob_ids.as_deref());
    c
}
