//! [`RunRecords`](crate::store::RunRecords): the `tool_calls`, `event_meta` and
//! `run_expiry` tables of migration 0002 (a snapshot's delta in `event_meta`: [`super::deltas`]).
//! The reads and the plain updates are written once here; what truly differs stays with each
//! backend (a started call's owning daemon on PostgreSQL; pruning; interrupting the calls of
//! a stopped daemon).

use super::{sql, Dialect, Exec, Value};
use crate::store::event_doc::now_ms;
use crate::store::records::{
    usage_sql, NamespaceUsage, RunPositions, ToolCallRecord, ToolCallStart, ToolOutcome,
};
use crate::store::StoreError;

/// Records a tool call as it starts (`awaiting` a decision when `held`, else `running`);
/// its id. `owner`, the daemon running it, only where several daemons share the table
/// (PostgreSQL's `tool_calls` has the column, SQLite's does not).
pub async fn tool_call_start<X: Exec>(
    x: &X,
    ns: &str,
    call: &ToolCallStart,
    held: bool,
    owner: Option<&str>,
) -> Result<i64, X::Error> {
    let d = X::DIALECT;
    let mut params = vec![
        Value::Text(ns),
        Value::Text(&call.agent_id),
        Value::OptText(call.run_id.as_deref()),
        Value::OptText(call.tool_call_id.as_deref()),
        Value::Text(&call.tool),
        Value::Int(call.started_at_ms),
        Value::Text(if held { "awaiting" } else { "running" }),
    ];
    let mut columns = "ns, agent_id, run_id, tool_call_id, tool, started_at, outcome".to_string();
    if let Some(owner) = owner {
        columns.push_str(", owner");
        params.push(Value::Text(owner));
    }
    let marks: Vec<String> = (1..=params.len()).map(|i| d.param(i)).collect();
    let sql = format!(
        "INSERT INTO tool_calls ({columns}) VALUES ({}) RETURNING id",
        marks.join(", ")
    );
    let id = x.first(&sql, &params, |r| r.int(0)).await?;
    Ok(id.ok_or_else(|| StoreError::Internal("a tool call was inserted without an id".into()))?)
}

/// What each namespace holds (only `ns`, when given).
pub async fn usage<X: Exec>(x: &X, ns: Option<&str>) -> Result<Vec<NamespaceUsage>, X::Error> {
    let filter = match ns {
        Some(_) => format!("WHERE ns = {}", X::DIALECT.param(1)),
        None => String::new(),
    };
    let cast = match X::DIALECT {
        Dialect::Sqlite => "",
        Dialect::Postgres => "::int8",
    };
    let sql = usage_sql(&|c| X::DIALECT.byte_length(c), &filter, cast);
    let params: &[Value] = match &ns {
        Some(ns) => &[Value::Text(ns)],
        None => &[],
    };
    x.all(&sql, params, |r| {
        let n = |i| Ok::<_, crate::store::StoreError>(r.opt_int(i)?.unwrap_or(0).max(0) as u64);
        Ok(NamespaceUsage {
            namespace: r.text(0)?.to_string(),
            agents: n(1)?,
            runs: n(2)?,
            events: n(3)?,
            checkpoints: n(4)?,
            memory_notes: n(5)?,
            stored_bytes: n(6)?,
        })
    })
    .await
}

pub async fn agent_count<X: Exec>(x: &X, ns: &str) -> Result<u64, X::Error> {
    let sql = sql!("SELECT COUNT(*) FROM agents WHERE ns = ?1");
    let n = x
        .first(sql.get(X::DIALECT), &[Value::Text(ns)], |r| r.int(0))
        .await?;
    Ok(n.map_or(0, |n| n.max(0) as u64))
}

pub async fn tool_call_resumed<X: Exec>(
    x: &X,
    id: i64,
    arguments: Option<&serde_json::Value>,
) -> Result<(), X::Error> {
    // The wait for the person ends here; the execution (duration) starts here.
    let sql = sql!(
        "UPDATE tool_calls SET outcome = 'running', waited_ms = ?2 - started_at, \
         started_at = ?2, arguments = ?3 WHERE id = ?1"
    );
    let arguments = arguments.map(|a| a.to_string());
    let params = [
        Value::Int(id),
        Value::Int(now_ms()),
        Value::OptText(arguments.as_deref()),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(())
}

pub async fn tool_call_ended<X: Exec>(
    x: &X,
    id: i64,
    outcome: ToolOutcome,
    cut_off: bool,
    ended_at_ms: i64,
    result: Option<&serde_json::Value>,
) -> Result<(), X::Error> {
    // A held call that ends without running (denied, expired, cancelled) waited until now.
    let sql = sql!(
        "UPDATE tool_calls SET waited_ms = CASE WHEN outcome = 'awaiting' THEN ?2 - started_at \
         ELSE waited_ms END, ended_at = ?2, outcome = ?3, cut_off = ?4, result = ?5 WHERE id = ?1"
    );
    let result = result.map(|r| r.to_string());
    let params = [
        Value::Int(id),
        Value::Int(ended_at_ms),
        Value::Text(outcome.as_str()),
        Value::Bool(cut_off),
        Value::OptText(result.as_deref()),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(())
}

pub async fn tool_calls_of_run<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
) -> Result<Vec<ToolCallRecord>, X::Error> {
    let sql = sql!(
        "SELECT agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, \
         cut_off, waited_ms, arguments, result FROM tool_calls WHERE ns = ?1 AND run_id = ?2 \
         ORDER BY id"
    );
    x.all(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(run_id)],
        |r| {
            Ok(ToolCallRecord {
                agent_id: r.text(0)?.to_string(),
                run_id: r.opt_text(1)?.map(str::to_string),
                tool_call_id: r.opt_text(2)?.map(str::to_string),
                tool: r.text(3)?.to_string(),
                started_at_ms: r.int(4)?,
                ended_at_ms: r.opt_int(5)?,
                outcome: ToolOutcome::parse(r.text(6)?),
                cut_off: r.bool(7)?,
                waited_ms: r.opt_int(8)?,
                arguments: r.opt_text(9)?.and_then(|t| serde_json::from_str(t).ok()),
                result: r.opt_text(10)?.and_then(|t| serde_json::from_str(t).ok()),
            })
        },
    )
    .await
}

pub async fn run_positions<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
) -> Result<RunPositions, X::Error> {
    let sql = sql!(
        "SELECT (SELECT max(seq) FROM run_events WHERE ns = ?1 AND run_id = ?2), \
         (SELECT expired_through FROM run_expiry WHERE ns = ?1 AND run_id = ?2)"
    );
    let params = [Value::Text(ns), Value::Text(run_id)];
    let row = x.first(sql.get(X::DIALECT), &params, |r| {
        Ok((r.opt_int(0)?, r.opt_int(1)?))
    });
    let (max, expired) = row.await?.unwrap_or((None, None));
    Ok(RunPositions::from_stored(max, expired))
}

/// [`run_positions`] of several runs in one statement (a page of runs), each looked up on
/// its own index entries.
pub async fn runs_positions<X: Exec>(
    x: &X,
    ns: &str,
    run_ids: &[String],
) -> Result<std::collections::HashMap<String, RunPositions>, X::Error> {
    let d = X::DIALECT;
    let sql = format!(
        "SELECT j.value, \
         (SELECT max(seq) FROM run_events WHERE ns = {p} AND run_id = j.value), \
         (SELECT expired_through FROM run_expiry WHERE ns = {p} AND run_id = j.value) \
         FROM {list}",
        p = d.param(1),
        list = d.list_rows(2)
    );
    let params = [Value::Text(ns), Value::TextList(run_ids)];
    let rows = x
        .all(&sql, &params, |r| {
            let pos = RunPositions::from_stored(r.opt_int(1)?, r.opt_int(2)?);
            Ok((r.text(0)?.to_string(), pos))
        })
        .await?;
    Ok(rows.into_iter().collect())
}

/// Keeps the text a run was started with (the first one kept wins: a retried append of the
/// same run does not replace it). An empty text records that the run has none.
pub async fn set_run_input<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    text: &str,
) -> Result<(), X::Error> {
    let sql = sql!(
        "INSERT INTO run_inputs (ns, run_id, text) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING"
    );
    let params = [Value::Text(ns), Value::Text(run_id), Value::Text(text)];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(())
}

/// The kept input record of one run, the empty text of a run that has none included.
pub async fn run_input_record<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
) -> Result<Option<String>, X::Error> {
    let sql = sql!("SELECT text FROM run_inputs WHERE ns = ?1 AND run_id = ?2");
    let params = [Value::Text(ns), Value::Text(run_id)];
    x.first(sql.get(X::DIALECT), &params, |r| Ok(r.text(0)?.to_string()))
        .await
}

/// The kept inputs of those runs that have one (not the empty text of a run that has none).
pub async fn run_inputs<X: Exec>(
    x: &X,
    ns: &str,
    run_ids: &[String],
) -> Result<std::collections::HashMap<String, String>, X::Error> {
    let sql = format!(
        "SELECT run_id, text FROM run_inputs WHERE ns = {} AND text <> '' AND {}",
        X::DIALECT.param(1),
        X::DIALECT.in_list("run_id", 2)
    );
    let params = [Value::Text(ns), Value::TextList(run_ids)];
    let rows = x
        .all(&sql, &params, |r| {
            Ok((r.text(0)?.to_string(), r.text(1)?.to_string()))
        })
        .await?;
    Ok(rows.into_iter().collect())
}

/// A `RunRecords` read over a list of runs, `fn $name(&self, ns, run_ids)`, answered by
/// `$read(x, ns, run_ids)` on a reader: the runs list's batched reads (one store call per
/// page for all its runs), written once.
macro_rules! runs_read {
    ($name:ident, $out:ty, $read:path) => {
        fn $name(
            &self,
            ns: &$crate::store::Namespace,
            run_ids: &[String],
        ) -> $crate::store::BoxFuture<'_, Result<$out, $crate::store::StoreError>> {
            let ns = ns.as_str().to_string();
            let run_ids = run_ids.to_vec();
            self.sql_read(move |x| {
                let (ns, run_ids) = (ns.clone(), run_ids.clone());
                Box::pin(async move { $read(x, &ns, &run_ids).await })
            })
        }
    };
}
pub(crate) use runs_read;

/// `impl RunRecords for $store`, for a store with `sql_read` and `sql_write` and its own
/// `tool_call_owner`, `prune_runs` and `interrupt_tool_calls`.
macro_rules! impl_run_records {
    ($store:ty) => {
        impl $crate::store::RunRecords for $store {
            fn find_sessions(
                &self,
                ns: &$crate::store::Namespace,
                q: $crate::store::find::SessionQuery,
            ) -> $crate::store::BoxFuture<'_, Result<String, $crate::store::StoreError>> {
                let ns = ns.as_str().to_string();
                self.sql_read(move |x| {
                    let (ns, q) = (ns.clone(), q.clone());
                    Box::pin(async move { $crate::store::sql::find::sessions(x, &ns, &q).await })
                })
            }

            fn find_runs(
                &self,
                ns: &$crate::store::Namespace,
                q: $crate::store::find::RunQuery,
            ) -> $crate::store::BoxFuture<'_, Result<String, $crate::store::StoreError>> {
                let ns = ns.as_str().to_string();
                self.sql_read(move |x| {
                    let (ns, q) = (ns.clone(), q.clone());
                    Box::pin(async move { $crate::store::sql::find::runs(x, &ns, &q).await })
                })
            }

            fn usage(
                &self,
                ns: Option<&$crate::store::Namespace>,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::records::NamespaceUsage>, $crate::store::StoreError>,
            > {
                let ns = ns.map(|n| n.as_str().to_string());
                self.sql_read(move |x| {
                    let ns = ns.clone();
                    Box::pin(
                        async move { $crate::store::sql::records::usage(x, ns.as_deref()).await },
                    )
                })
            }

            fn agent_count(
                &self,
                ns: &$crate::store::Namespace,
            ) -> $crate::store::BoxFuture<'_, Result<u64, $crate::store::StoreError>> {
                let [ns] = $crate::store::sql::owned([ns.as_str()]);
                self.sql_read(move |x| {
                    let ns = ns.clone();
                    Box::pin(async move { $crate::store::sql::records::agent_count(x, &ns).await })
                })
            }

            fn tool_call_started(
                &self,
                ns: &$crate::store::Namespace,
                call: $crate::store::records::ToolCallStart,
                held: bool,
            ) -> $crate::store::BoxFuture<'_, Result<i64, $crate::store::StoreError>> {
                let [ns] = $crate::store::sql::owned([ns.as_str()]);
                let owner = self.tool_call_owner();
                self.sql_write(move |x| {
                    let (ns, call, owner) = (ns.clone(), call.clone(), owner.clone());
                    Box::pin(async move {
                        $crate::store::sql::records::tool_call_start(
                            x,
                            &ns,
                            &call,
                            held,
                            owner.as_deref(),
                        )
                        .await
                    })
                })
            }

            fn tool_call_resumed(
                &self,
                id: i64,
                arguments: Option<serde_json::Value>,
            ) -> $crate::store::BoxFuture<'_, Result<(), $crate::store::StoreError>> {
                self.sql_write(move |x| {
                    let arguments = arguments.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::tool_call_resumed(x, id, arguments.as_ref())
                            .await
                    })
                })
            }

            fn tool_call_ended(
                &self,
                id: i64,
                outcome: $crate::store::records::ToolOutcome,
                cut_off: bool,
                ended_at_ms: i64,
                result: Option<serde_json::Value>,
            ) -> $crate::store::BoxFuture<'_, Result<(), $crate::store::StoreError>> {
                self.sql_write(move |x| {
                    let result = result.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::tool_call_ended(
                            x,
                            id,
                            outcome,
                            cut_off,
                            ended_at_ms,
                            result.as_ref(),
                        )
                        .await
                    })
                })
            }

            fn tool_calls_of_run(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::records::ToolCallRecord>, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), run_id]);
                self.sql_read(move |x| {
                    let [ns, run_id] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::tool_calls_of_run(x, &ns, &run_id).await
                    })
                })
            }

            fn snapshot_delta(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
                seq: u64,
                new: Option<u32>,
            ) -> $crate::store::BoxFuture<'_, Result<u32, $crate::store::StoreError>> {
                let key = $crate::store::sql::owned([ns.as_str(), run_id]);
                let seq = i64::try_from(seq).unwrap_or(i64::MAX);
                let read_key = key.clone();
                let seen = self.sql_read(move |x| {
                    let [ns, run_id] = read_key.clone();
                    Box::pin(async move {
                        $crate::store::sql::deltas::delta_seen(x, &ns, &run_id, seq, new).await
                    })
                });
                Box::pin(async move {
                    if let Some(delta) = seen.await? {
                        return Ok(delta);
                    }
                    self.sql_write(move |x| {
                        let [ns, run_id] = key.clone();
                        Box::pin(async move {
                            $crate::store::sql::deltas::delta_of(x, &ns, &run_id, seq, new).await
                        })
                    })
                    .await
                })
            }

            fn set_run_input(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
                text: &str,
            ) -> $crate::store::BoxFuture<'_, Result<(), $crate::store::StoreError>> {
                let args = $crate::store::sql::owned([ns.as_str(), run_id, text]);
                self.sql_write(move |x| {
                    let [ns, run_id, text] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::set_run_input(x, &ns, &run_id, &text).await
                    })
                })
            }

            fn run_input_record(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
            ) -> $crate::store::BoxFuture<'_, Result<Option<String>, $crate::store::StoreError>>
            {
                let args = $crate::store::sql::owned([ns.as_str(), run_id]);
                self.sql_read(move |x| {
                    let [ns, run_id] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::run_input_record(x, &ns, &run_id).await
                    })
                })
            }

            fn latest_run(
                &self,
                ns: &$crate::store::Namespace,
                agent_id: &str,
            ) -> $crate::store::BoxFuture<'_, Result<Option<String>, $crate::store::StoreError>>
            {
                let args = $crate::store::sql::owned([ns.as_str(), agent_id]);
                self.sql_read(move |x| {
                    let [ns, agent_id] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::runs::latest_of_agent(x, &ns, &agent_id).await
                    })
                })
            }

            $crate::store::sql::records::runs_read!(
                run_inputs,
                std::collections::HashMap<String, String>,
                $crate::store::sql::records::run_inputs
            );

            fn run_positions(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<$crate::store::records::RunPositions, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), run_id]);
                self.sql_read(move |x| {
                    let [ns, run_id] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::records::run_positions(x, &ns, &run_id).await
                    })
                })
            }

            $crate::store::sql::records::runs_read!(
                runs_positions,
                std::collections::HashMap<String, $crate::store::records::RunPositions>,
                $crate::store::sql::records::runs_positions
            );

            $crate::store::sql::records::runs_read!(
                last_events,
                std::collections::HashMap<String, String>,
                $crate::store::sql::run_events::last_of_runs
            );

            fn prune_batch(
                &self,
                ended_before_ms: i64,
                batch: usize,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<$crate::store::records::PruneReport, $crate::store::StoreError>,
            > {
                self.prune_runs(ended_before_ms, batch)
            }

            fn prune_preview(
                &self,
                ended_before_ms: i64,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<$crate::store::records::PrunePreview, $crate::store::StoreError>,
            > {
                self.sql_read(move |x| {
                    Box::pin(async move {
                        $crate::store::sql::prune::prune_preview(x, ended_before_ms).await
                    })
                })
            }

            fn interrupt_running_tool_calls(
                &self,
            ) -> $crate::store::BoxFuture<'_, Result<u64, $crate::store::StoreError>> {
                self.interrupt_tool_calls()
            }
        }
    };
}
pub(crate) use impl_run_records;
