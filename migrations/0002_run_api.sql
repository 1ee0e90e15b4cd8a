-- callbackd schema v2: what the run API keeps beside the bridge's own records.

-- Every custom tool call callbackd ran: the run API's `tool_outcome_unknown` and the run
-- state's tool call list come from here. `run_id` is the agent's active run when the call
-- arrived (the call itself names only the agent). `cut_off` = 1 when the call was stopped
-- mid-execution (timed out, panicked, its connection dropped, the daemon stopped), so its
-- effect on the world is unknown.
CREATE TABLE tool_calls (
    id           INTEGER PRIMARY KEY,
    ns           TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    run_id       TEXT,
    tool_call_id TEXT,
    tool         TEXT NOT NULL,
    started_at   INTEGER NOT NULL,  -- epoch ms
    ended_at     INTEGER,           -- NULL while it runs
    outcome      TEXT NOT NULL,     -- running | ok | error | timeout | cancelled | interrupted
    cut_off      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_by_run ON tool_calls (ns, run_id, id);
CREATE INDEX tool_calls_by_agent ON tool_calls (ns, agent_id, id);

-- Per-event facts the stream sends that the bridge does not store: how many `token`
-- fragments a `message_snapshot` replaced (recorded once, so a replay sends the same value).
CREATE TABLE event_meta (
    ns     TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    delta  INTEGER NOT NULL,
    PRIMARY KEY (ns, run_id, seq)
);

-- Retention: up to which seq a run's events were removed (a replay that needs them is 410).
CREATE TABLE run_expiry (
    ns              TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    expired_through INTEGER NOT NULL,
    pruned_at       INTEGER NOT NULL,
    PRIMARY KEY (ns, run_id)
);
