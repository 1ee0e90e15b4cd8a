-- callbackd schema v3: human approval of tool calls.

-- Every call that waited for a decision, and how it was decided. state: pending, approved,
-- denied, expired (no decision in time: denied), cancelled (the bridge hung up, or callbackd
-- stopped while it waited).
CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    ns           TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT,
    tool         TEXT NOT NULL,
    tool_call_id TEXT,
    args         TEXT NOT NULL,      -- the call's arguments, JSON text
    created_at   INTEGER NOT NULL,   -- epoch ms
    expires_at   INTEGER NOT NULL,
    state        TEXT NOT NULL,
    decided_by   TEXT,
    decided_at   INTEGER,
    reason       TEXT
);
CREATE INDEX approvals_pending ON approvals (ns, state, created_at);
CREATE INDEX approvals_by_run ON approvals (ns, run_id);
