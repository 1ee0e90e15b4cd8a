-- callbackd schema v1.
--
-- Every table starts with `ns`, the namespace of the bridge that wrote the row. Today one
-- daemon serves one namespace ("default"); several bridges with one token each will get a
-- namespace each without a schema change.
--
-- Documents (agents, runs) are stored whole as the JSON text the client sent, so unknown and
-- nested keys, nulls and number spellings come back byte for byte. The other columns are
-- copies of the few keys the store sorts or filters on.

CREATE TABLE agents (
    ns         TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    cwd        TEXT NOT NULL,
    updated_at REAL NOT NULL,
    doc        TEXT NOT NULL,
    PRIMARY KEY (ns, agent_id)
);
-- agents.list: updatedAt desc, agentId desc, optionally within one cwd.
CREATE INDEX agents_by_recency ON agents (ns, updated_at DESC, agent_id DESC);
CREATE INDEX agents_by_cwd ON agents (ns, cwd, updated_at DESC, agent_id DESC);

CREATE TABLE runs (
    ns          TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    turn_number REAL NOT NULL,
    doc         TEXT NOT NULL,
    PRIMARY KEY (ns, agent_id, run_id)
);
-- runs.list: turnNumber asc, runId asc, usually within one agent.
CREATE INDEX runs_by_agent_turn ON runs (ns, agent_id, turn_number, run_id);
CREATE INDEX runs_by_turn ON runs (ns, turn_number, run_id);
CREATE INDEX runs_by_id ON runs (ns, run_id);

-- Run events are keyed by run only (the contract's appends carry no agent id).
-- seq is 1 + the run's max seq, assigned inside the writer's transaction.
CREATE TABLE run_events (
    ns              TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    event_type      TEXT NOT NULL,
    payload         TEXT NOT NULL,   -- raw JSON text; 'null' when the append had none
    payload_ref     TEXT,
    idempotency_key TEXT,
    created_at      INTEGER NOT NULL, -- epoch ms
    PRIMARY KEY (ns, run_id, seq)
);
-- Idempotent append: one event per non-empty key within a run.
CREATE UNIQUE INDEX run_events_by_key ON run_events (ns, run_id, idempotency_key)
    WHERE idempotency_key <> '';

-- Checkpoint blobs, decoded from base64. crc32 is the checksum of data as written and is
-- verified on every read: the bridge itself never checks the bytes it reads back.
CREATE TABLE checkpoints (
    ns       TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    blob_id  TEXT NOT NULL,
    data     BLOB NOT NULL,
    crc32    INTEGER NOT NULL,
    PRIMARY KEY (ns, agent_id, blob_id)
);
CREATE INDEX checkpoints_by_blob ON checkpoints (ns, blob_id);

-- The `memory` built-in tool: a small key/value notebook per agent.
CREATE TABLE memory_notes (
    ns         TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (ns, agent_id, key)
);
