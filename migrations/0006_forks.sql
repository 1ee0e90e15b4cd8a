-- callbackd schema: sessions forked from a run of another session (POST
-- /v1/sessions/{id}/fork). One row per fork, keyed by the fork's agent id; it goes with the
-- fork (agents.delete), never with its source: deleting the source leaves the fork and
-- this record of where it came from.
CREATE TABLE session_forks (
    ns              TEXT NOT NULL,
    agent_id        TEXT NOT NULL,      -- the fork
    source_agent_id TEXT NOT NULL,
    source_run_id   TEXT NOT NULL,
    at              TEXT NOT NULL,      -- 'after' or 'before' the source run
    model           TEXT NOT NULL,      -- the source's model, until the fork has runs
    tools           TEXT NOT NULL,      -- the declared tool names, JSON array
    created_at      INTEGER NOT NULL,   -- epoch ms
    PRIMARY KEY (ns, agent_id)
);
CREATE INDEX session_forks_by_source ON session_forks (ns, source_agent_id, source_run_id);
