//! [`Transfer`] on PostgreSQL, for `callbackd copy-store`.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls};

use super::{migrate, redact_url, PgOptions, PgStore};
use crate::store::transfer::{json, Key, Row, Table, Transfer, TransferError};
use crate::store::{sql, BoxFuture};

/// One side of a copy: a connection of its own, on the store's schema.
pub struct PgTransfer {
    client: Client,
    url: String,
}

impl PgTransfer {
    /// Connects to the store `opts` names; a target is migrated first (as the daemon would).
    pub async fn open(opts: &PgOptions, target: bool) -> Result<Self, TransferError> {
        let store = PgStore::connect(opts, target)
            .await
            .map_err(|e| TransferError::Store(format!("{e:#}")))?;
        let schema = store.inner.schema.clone();
        drop(store);
        let url = redact_url(opts.url.expose());
        let fail =
            |e: tokio_postgres::Error| TransferError::Store(format!("PostgreSQL {url}: {e}"));
        let (client, connection) = tokio_postgres::connect(opts.url.expose(), NoTls)
            .await
            .map_err(fail)?;
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "SET search_path TO {}",
                migrate::quote_ident(&schema)
            ))
            .await
            .map_err(fail)?;
        Ok(PgTransfer { client, url })
    }

    fn fail(&self, e: &tokio_postgres::Error) -> TransferError {
        TransferError::Store(format!("PostgreSQL {}: {e}", self.url))
    }

    async fn read_now(
        &self,
        table: Table,
        after: Option<&Key>,
        limit: usize,
    ) -> Result<Vec<Row>, TransferError> {
        let (columns, key) = sql::transfer::columns(table);
        let (texts, seq): (Vec<String>, Option<i64>) = match after {
            None => (Vec::new(), None),
            Some(Key::Text(parts)) => (parts.clone(), None),
            Some(Key::Event(ns, run, seq)) => (vec![ns.clone(), run.clone()], Some(*seq)),
            Some(Key::Id(id)) => (Vec::new(), Some(*id)),
        };
        let mut params: Vec<&(dyn ToSql + Sync)> =
            texts.iter().map(|t| t as &(dyn ToSql + Sync)).collect();
        if let Some(seq) = &seq {
            params.push(seq);
        }
        let condition = if params.is_empty() {
            String::new()
        } else {
            let marks: Vec<String> = (1..=params.len()).map(|i| format!("${i}")).collect();
            format!("WHERE ({key}) > ({})", marks.join(", "))
        };
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        params.push(&lim);
        let sql = format!(
            "SELECT {columns} FROM {} {condition} ORDER BY {key} LIMIT ${}",
            table.name(),
            params.len()
        );
        let rows = self
            .client
            .query(&sql, &params)
            .await
            .map_err(|e| self.fail(&e))?;
        let name = table.name();
        rows.into_iter()
            .map(|r| {
                Ok(match table {
                    Table::Agents => Row::Agent {
                        ns: r.get(0),
                        agent_id: r.get(1),
                        cwd: r.get(2),
                        updated_at: r.get(3),
                        doc: json(name, r.get(4))?,
                    },
                    Table::Runs => Row::Run {
                        ns: r.get(0),
                        agent_id: r.get(1),
                        run_id: r.get(2),
                        turn_number: r.get(3),
                        doc: json(name, r.get(4))?,
                    },
                    Table::RunEvents => Row::Event {
                        ns: r.get(0),
                        run_id: r.get(1),
                        seq: r.get(2),
                        event_type: r.get(3),
                        payload: json(name, r.get(4))?,
                        payload_ref: r.get(5),
                        idempotency_key: r.get(6),
                        created_at: r.get(7),
                    },
                    Table::Checkpoints => Row::Checkpoint {
                        ns: r.get(0),
                        agent_id: r.get(1),
                        blob_id: r.get(2),
                        data: r.get(3),
                        crc32: r.get(4),
                    },
                    Table::MemoryNotes => Row::Note {
                        ns: r.get(0),
                        agent_id: r.get(1),
                        key: r.get(2),
                        value: r.get(3),
                        updated_at: r.get(4),
                    },
                    Table::ToolCalls => Row::ToolCall {
                        id: r.get(0),
                        ns: r.get(1),
                        agent_id: r.get(2),
                        run_id: r.get(3),
                        tool_call_id: r.get(4),
                        tool: r.get(5),
                        started_at: r.get(6),
                        ended_at: r.get(7),
                        outcome: r.get(8),
                        cut_off: r.get(9),
                    },
                    Table::EventMeta => Row::EventMeta {
                        ns: r.get(0),
                        run_id: r.get(1),
                        seq: r.get(2),
                        delta: r.get(3),
                    },
                    Table::RunExpiry => Row::RunExpiry {
                        ns: r.get(0),
                        run_id: r.get(1),
                        expired_through: r.get(2),
                        pruned_at: r.get(3),
                    },
                    Table::Approvals => Row::Approval {
                        id: r.get(0),
                        ns: r.get(1),
                        agent_id: r.get(2),
                        run_id: r.get(3),
                        tool: r.get(4),
                        tool_call_id: r.get(5),
                        args: json(name, r.get(6))?,
                        created_at: r.get(7),
                        expires_at: r.get(8),
                        state: r.get(9),
                        decided_by: r.get(10),
                        decided_at: r.get(11),
                        reason: r.get(12),
                    },
                    Table::RunInputs => Row::RunInput {
                        ns: r.get(0),
                        run_id: r.get(1),
                        text: r.get(2),
                    },
                    Table::SessionForks => Row::Fork {
                        ns: r.get(0),
                        agent_id: r.get(1),
                        source_agent_id: r.get(2),
                        source_run_id: r.get(3),
                        at: r.get(4),
                        model: r.get(5),
                        tools: r.get(6),
                        created_at: r.get(7),
                    },
                })
            })
            .collect()
    }

    async fn write_now(&mut self, rows: &[Row]) -> Result<(), tokio_postgres::Error> {
        let tx = self.client.transaction().await?;
        for row in rows {
            match row {
                Row::Agent { ns, agent_id, cwd, updated_at, doc } => tx
                    .execute("INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES ($1, $2, $3, $4, $5)",
                        &[ns, agent_id, cwd, updated_at, &doc.as_str()]).await?,
                Row::Run { ns, agent_id, run_id, turn_number, doc } => tx
                    .execute("INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES ($1, $2, $3, $4, $5)",
                        &[ns, agent_id, run_id, turn_number, &doc.as_str()]).await?,
                Row::Event { ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at } => tx
                    .execute("INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                        &[ns, run_id, seq, event_type, &payload.as_str(), payload_ref, idempotency_key, created_at]).await?,
                Row::Checkpoint { ns, agent_id, blob_id, data, crc32 } => tx
                    .execute("INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES ($1, $2, $3, $4, $5)",
                        &[ns, agent_id, blob_id, data, crc32]).await?,
                Row::Note { ns, agent_id, key, value, updated_at } => tx
                    .execute("INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES ($1, $2, $3, $4, $5)",
                        &[ns, agent_id, key, value, updated_at]).await?,
                Row::ToolCall { id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off } => tx
                    .execute("INSERT INTO tool_calls (id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                        &[id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off]).await?,
                Row::EventMeta { ns, run_id, seq, delta } => tx
                    .execute("INSERT INTO event_meta (ns, run_id, seq, delta) VALUES ($1, $2, $3, $4)",
                        &[ns, run_id, seq, delta]).await?,
                Row::RunExpiry { ns, run_id, expired_through, pruned_at } => tx
                    .execute("INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) VALUES ($1, $2, $3, $4)",
                        &[ns, run_id, expired_through, pruned_at]).await?,
                Row::Approval { id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason } => tx
                    .execute("INSERT INTO approvals (id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                        &[id, ns, agent_id, run_id, tool, tool_call_id, &args.as_str(), created_at, expires_at, state, decided_by, decided_at, reason]).await?,
                Row::RunInput { ns, run_id, text } => tx
                    .execute("INSERT INTO run_inputs (ns, run_id, text) VALUES ($1, $2, $3)",
                        &[ns, run_id, text]).await?,
                Row::Fork { ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at } => tx
                    .execute("INSERT INTO session_forks (ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                        &[ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at]).await?,
            };
        }
        tx.commit().await
    }
}

impl Transfer for PgTransfer {
    fn describe(&self) -> String {
        format!("PostgreSQL {}", self.url)
    }

    fn count(&mut self, table: Table) -> BoxFuture<'_, Result<u64, TransferError>> {
        Box::pin(async move {
            let n: i64 = self
                .client
                .query_one(&format!("SELECT count(*) FROM {}", table.name()), &[])
                .await
                .map_err(|e| self.fail(&e))?
                .get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn read<'a>(
        &'a mut self,
        table: Table,
        after: Option<&'a Key>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Row>, TransferError>> {
        Box::pin(self.read_now(table, after, limit))
    }

    fn write<'a>(&'a mut self, rows: &'a [Row]) -> BoxFuture<'a, Result<(), TransferError>> {
        Box::pin(async move { self.write_now(rows).await.map_err(|e| self.fail(&e)) })
    }

    /// Each run's seq counter: the next append continues after the copied events.
    fn finish(&mut self) -> BoxFuture<'_, Result<(), TransferError>> {
        Box::pin(async move {
            self.client
                .batch_execute(
                    "INSERT INTO run_seqs (ns, run_id, last_seq) \
                     SELECT ns, run_id, max(seq) FROM run_events GROUP BY ns, run_id; \
                     SELECT setval(pg_get_serial_sequence('tool_calls', 'id'), \
                                   (SELECT max(id) FROM tool_calls)) \
                     WHERE EXISTS (SELECT 1 FROM tool_calls)",
                )
                .await
                .map_err(|e| self.fail(&e))
        })
    }
}
