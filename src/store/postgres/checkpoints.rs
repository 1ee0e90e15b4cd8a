//! SQL of the `checkpoints` substore on PostgreSQL: blobs as `bytea` with their checksum.

use tokio_postgres::types::Type;

use super::db::{Conditions, Db, Value};
use super::error::Fail;
use super::keyset::{limit_param, write_page};
use crate::store::json::{json_str, push_json_str};
use crate::store::{blob, CheckpointFilter, Page, StoreError, StoreOutput};

/// `{"found":true,"data":...}` of bytes that still match their checksum, or
/// `{"found":false}`.
pub async fn get(
    db: &Db<'_>,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
) -> Result<StoreOutput, Fail> {
    let row = db
        .query_opt(
            "SELECT data, crc32 FROM checkpoints WHERE ns = $1 AND agent_id = $2 AND blob_id = $3",
            &[
                (&ns, Type::TEXT),
                (&agent_id, Type::TEXT),
                (&blob_id, Type::TEXT),
            ],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Some(blob::NOT_FOUND.to_string()));
    };
    let data: &[u8] = row.get(0);
    blob::verify(data, row.get(1), agent_id, blob_id)?;
    Ok(Some(blob::found(data)))
}

pub async fn create(
    db: &Db<'_>,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, Fail> {
    let crc = blob::checksum(data);
    let n = db
        .execute(
            "INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (ns, agent_id, blob_id) DO NOTHING",
            &[
                (&ns, Type::TEXT),
                (&agent_id, Type::TEXT),
                (&blob_id, Type::TEXT),
                (&data, Type::BYTEA),
                (&crc, Type::INT8),
            ],
        )
        .await?;
    if n == 0 {
        return Err(StoreError::AlreadyExists(format!(
            "checkpoint blob {blob_id} already exists for agent {agent_id}"
        ))
        .into());
    }
    Ok(None)
}

pub async fn update(
    db: &Db<'_>,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, Fail> {
    let crc = blob::checksum(data);
    let n = db
        .execute(
            "UPDATE checkpoints SET data = $4, crc32 = $5 WHERE ns = $1 AND agent_id = $2 AND blob_id = $3",
            &[
                (&ns, Type::TEXT),
                (&agent_id, Type::TEXT),
                (&blob_id, Type::TEXT),
                (&data, Type::BYTEA),
                (&crc, Type::INT8),
            ],
        )
        .await?;
    if n == 0 {
        return Err(StoreError::NotFound(format!(
            "checkpoint blob {blob_id} not found for agent {agent_id}"
        ))
        .into());
    }
    Ok(None)
}

/// Idempotent.
pub async fn delete(db: &Db<'_>, ns: &str, filter: &CheckpointFilter) -> Result<StoreOutput, Fail> {
    let c = conditions(ns, filter);
    db.execute(
        &format!("DELETE FROM checkpoints WHERE {}", c.sql()),
        &c.params(),
    )
    .await?;
    Ok(None)
}

/// Blob ids ascending (bytewise), each once; the cursor is the raw last id.
pub async fn list(
    db: &Db<'_>,
    ns: &str,
    filter: &CheckpointFilter,
    page: &Page<String>,
) -> Result<StoreOutput, Fail> {
    let mut c = conditions(ns, filter);
    if let Some(cursor) = &page.cursor {
        c.raw("blob_id > {}::text", vec![Value::Text(cursor.clone())]);
    }
    let sql = format!(
        "SELECT DISTINCT blob_id FROM checkpoints WHERE {} ORDER BY blob_id LIMIT ${}",
        c.sql(),
        c.next_param()
    );
    let lim = limit_param(page.limit);
    let mut params = c.params();
    params.push((&lim, Type::INT8));
    let rows = db.query(&sql, &params).await?;
    Ok(Some(write_page(
        &rows,
        page.limit,
        "nextCursor",
        |row, out| push_json_str(out, row.get(0)),
        |row| json_str(row.get(0)),
    )))
}

fn conditions(ns: &str, filter: &CheckpointFilter) -> Conditions {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("blob_id", filter.blob_ids.as_deref());
    c
}
