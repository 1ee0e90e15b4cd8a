//! SQL of the `checkpoints` substore: conversation blobs, stored as bytes with a checksum.

use super::page::limit_clause;
use super::{sql, write_page, Conditions, Exec, Value};
use crate::store::json::{json_str, push_json_str};
use crate::store::{blob, CheckpointFilter, Page, StoreError, StoreOutput};

/// Every blob of every namespace with its stored checksum, for `callbackd check`
/// ([`CheckReport::blob`](crate::store::check::CheckReport::blob)): key columns 0-2, the
/// bytes 3, the checksum 4. No parameters, so one text serves both dialects.
pub const EVERY_BLOB: &str = "SELECT ns, agent_id, blob_id, data, crc32 FROM checkpoints";

/// `{"found":true,"data":<base64>}` or `{"found":false}`. The bytes are checked against the
/// checksum taken when they were written: the bridge would use corrupted bytes unnoticed.
pub async fn get<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "SELECT data, crc32 FROM checkpoints WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3"
    );
    let params = [Value::Text(ns), Value::Text(agent_id), Value::Text(blob_id)];
    let found = x
        .first(sql.get(X::DIALECT), &params, |r| {
            let data = r.bytes(0)?;
            blob::verify(data, r.int(1)?, agent_id, blob_id)?;
            Ok(blob::found(data))
        })
        .await?;
    Ok(Some(found.unwrap_or_else(|| blob::NOT_FOUND.to_string())))
}

pub async fn create<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES (?1, ?2, ?3, ?4, ?5)",
        pg: " ON CONFLICT (ns, agent_id, blob_id) DO NOTHING"
    );
    let params = params(ns, agent_id, blob_id, data);
    if !x.insert_new(sql.get(X::DIALECT), &params).await? {
        return Err(StoreError::AlreadyExists(format!(
            "checkpoint blob {blob_id} already exists for agent {agent_id}"
        ))
        .into());
    }
    Ok(None)
}

pub async fn update<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
    blob_id: &str,
    data: &[u8],
) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "UPDATE checkpoints SET data = ?4, crc32 = ?5 WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3"
    );
    let params = params(ns, agent_id, blob_id, data);
    if x.execute(sql.get(X::DIALECT), &params).await? == 0 {
        return Err(StoreError::NotFound(format!(
            "checkpoint blob {blob_id} not found for agent {agent_id}"
        ))
        .into());
    }
    Ok(None)
}

fn params<'a>(ns: &'a str, agent_id: &'a str, blob_id: &'a str, data: &'a [u8]) -> [Value<'a>; 5] {
    [
        Value::Text(ns),
        Value::Text(agent_id),
        Value::Text(blob_id),
        Value::Bytes(data),
        Value::Int(blob::checksum(data)),
    ]
}

/// Idempotent.
pub async fn delete<X: Exec>(
    x: &X,
    ns: &str,
    filter: &CheckpointFilter,
) -> Result<StoreOutput, X::Error> {
    let c = conditions::<X>(ns, filter);
    x.execute(
        &format!("DELETE FROM checkpoints WHERE {}", c.sql()),
        c.params(),
    )
    .await?;
    Ok(None)
}

/// Blob ids ascending; the cursor is the raw last id. Ids are listed once even when several
/// agents hold the same blob, so "ids greater than the cursor" never skips one.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    filter: &CheckpointFilter,
    page: &Page<String>,
) -> Result<StoreOutput, X::Error> {
    let mut c = conditions::<X>(ns, filter);
    if let Some(cursor) = &page.cursor {
        c.raw(
            |d, p| format!("blob_id > {}", d.typed(p, "text")),
            [Value::Text(cursor)],
        );
    }
    let cond = c.sql();
    let mut params = c.into_params();
    let limit = limit_clause(X::DIALECT, page.limit, &mut params);
    let sql =
        format!("SELECT DISTINCT blob_id FROM checkpoints WHERE {cond} ORDER BY blob_id {limit}");
    let out = write_page(
        x,
        &sql,
        &params,
        page.limit,
        "nextCursor",
        |row, out| {
            push_json_str(out, row.text(0)?);
            Ok(())
        },
        |row| Ok(row.text(0)?.to_string()),
        |last| json_str(last),
    )
    .await?;
    Ok(Some(out))
}

fn conditions<'a, X: Exec>(ns: &'a str, filter: &'a CheckpointFilter) -> Conditions<'a> {
    let mut c = Conditions::new(X::DIALECT, ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("blob_id", filter.blob_ids.as_deref());
    c
}
