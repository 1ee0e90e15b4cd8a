-- callbackd schema v3 on PostgreSQL: human approval of tool calls (migrations/0003 on
-- SQLite). `owner` is the daemon whose call waits: a starting daemon cancels only the
-- pending approvals of daemons that are gone.
CREATE TABLE approvals (
    id           text COLLATE "C" PRIMARY KEY,
    ns           text COLLATE "C" NOT NULL,
    agent_id     text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C",
    tool         text NOT NULL,
    tool_call_id text,
    args         text NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL,
    state        text NOT NULL,
    decided_by   text,
    decided_at   bigint,
    reason       text,
    owner        text NOT NULL DEFAULT ''
);
CREATE INDEX approvals_pending ON approvals (ns, state, created_at);
CREATE INDEX approvals_by_run ON approvals (ns, run_id);
