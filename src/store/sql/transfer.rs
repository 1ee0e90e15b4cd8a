//! The tables `copy-store` copies, as both backends read them.

use crate::store::transfer::Table;

/// The columns of `table` in the order of its [`Row`](crate::store::transfer::Row), and its
/// key (the order pages are read in).
pub fn columns(table: Table) -> (&'static str, &'static str) {
    match table {
        Table::Agents => ("ns, agent_id, cwd, updated_at, doc", "ns, agent_id"),
        Table::Runs => (
            "ns, agent_id, run_id, turn_number, doc",
            "ns, agent_id, run_id",
        ),
        Table::RunEvents => (
            "ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at",
            "ns, run_id, seq",
        ),
        Table::Checkpoints => (
            "ns, agent_id, blob_id, data, crc32",
            "ns, agent_id, blob_id",
        ),
        Table::MemoryNotes => ("ns, agent_id, key, value, updated_at", "ns, agent_id, key"),
        Table::ToolCalls => (
            "id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off",
            "id",
        ),
        Table::EventMeta => ("ns, run_id, seq, delta", "ns, run_id, seq"),
        Table::RunExpiry => ("ns, run_id, expired_through, pruned_at", "ns, run_id"),
        Table::RunInputs => ("ns, run_id, text", "ns, run_id"),
        Table::Approvals => (
            "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason",
            "id",
        ),
        Table::SessionForks => (
            "ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at",
            "ns, agent_id",
        ),
    }
}
