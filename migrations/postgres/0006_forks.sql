-- callbackd schema on PostgreSQL: sessions forked from a run of another session
-- (migrations/0006 on SQLite). The row goes with the fork, never with its source.
CREATE TABLE session_forks (
    ns              text COLLATE "C" NOT NULL,
    agent_id        text COLLATE "C" NOT NULL,
    source_agent_id text COLLATE "C" NOT NULL,
    source_run_id   text COLLATE "C" NOT NULL,
    at              text NOT NULL,
    model           text NOT NULL,
    tools           text NOT NULL,
    created_at      bigint NOT NULL,
    PRIMARY KEY (ns, agent_id)
);
CREATE INDEX session_forks_by_source ON session_forks (ns, source_agent_id, source_run_id);
