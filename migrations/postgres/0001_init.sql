-- callbackd schema v1 on PostgreSQL: the tables of migrations/0001_init.sql (SQLite), with
-- the same keys, plus the per-run event counter.
--
-- Text keys use the "C" collation so that ORDER BY and keyset comparisons order by bytes,
-- as SQLite does; the database's default collation (en_US and the like) would sort
-- "B" < "a" differently and cursors would skip or repeat items.
--
-- Documents and payloads are `text`, not `jsonb`: jsonb reorders keys, drops duplicates
-- and respells numbers, and the contract wants documents back byte for byte.

CREATE TABLE agents (
    ns         text COLLATE "C" NOT NULL,
    agent_id   text COLLATE "C" NOT NULL,
    cwd        text COLLATE "C" NOT NULL,
    updated_at double precision NOT NULL,
    doc        text NOT NULL,
    PRIMARY KEY (ns, agent_id)
);
CREATE INDEX agents_by_recency ON agents (ns, updated_at DESC, agent_id DESC);
CREATE INDEX agents_by_cwd ON agents (ns, cwd, updated_at DESC, agent_id DESC);

CREATE TABLE runs (
    ns          text COLLATE "C" NOT NULL,
    agent_id    text COLLATE "C" NOT NULL,
    run_id      text COLLATE "C" NOT NULL,
    turn_number double precision NOT NULL,
    doc         text NOT NULL,
    PRIMARY KEY (ns, agent_id, run_id)
);
CREATE INDEX runs_by_agent_turn ON runs (ns, agent_id, turn_number, run_id);
CREATE INDEX runs_by_turn ON runs (ns, turn_number, run_id);
CREATE INDEX runs_by_id ON runs (ns, run_id);

-- The last seq of each run that has events. An append increments it in its own
-- transaction (the row lock serializes the appends of one run, across daemons, and a
-- rollback gives the number back), so seqs are gap-free; deleting a run's events deletes
-- its counter, so the next append starts again at 1, as on SQLite (max(seq) + 1).
CREATE TABLE run_seqs (
    ns       text COLLATE "C" NOT NULL,
    run_id   text COLLATE "C" NOT NULL,
    last_seq bigint NOT NULL,
    PRIMARY KEY (ns, run_id)
);

CREATE TABLE run_events (
    ns              text COLLATE "C" NOT NULL,
    run_id          text COLLATE "C" NOT NULL,
    seq             bigint NOT NULL,
    event_type      text NOT NULL,
    payload         text NOT NULL,
    payload_ref     text,
    idempotency_key text COLLATE "C",
    created_at      bigint NOT NULL,
    PRIMARY KEY (ns, run_id, seq)
);
CREATE UNIQUE INDEX run_events_by_key ON run_events (ns, run_id, idempotency_key)
    WHERE idempotency_key <> '';

CREATE TABLE checkpoints (
    ns       text COLLATE "C" NOT NULL,
    agent_id text COLLATE "C" NOT NULL,
    blob_id  text COLLATE "C" NOT NULL,
    data     bytea NOT NULL,
    crc32    bigint NOT NULL,
    PRIMARY KEY (ns, agent_id, blob_id)
);
CREATE INDEX checkpoints_by_blob ON checkpoints (ns, blob_id);

CREATE TABLE memory_notes (
    ns         text COLLATE "C" NOT NULL,
    agent_id   text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      text NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (ns, agent_id, key)
);
