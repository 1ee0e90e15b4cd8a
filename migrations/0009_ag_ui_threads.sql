-- callbackd schema: AG-UI threads (POST /v1/ag-ui). A thread is a session; the client names
-- the thread, the bridge names the agent, so the thread id is kept here as an alias of the
-- agent id it started. The row goes with the agent (agents.delete).
CREATE TABLE ag_ui_threads (
    ns         TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,   -- epoch ms
    PRIMARY KEY (ns, thread_id)
);
CREATE INDEX ag_ui_threads_by_agent ON ag_ui_threads (ns, agent_id);
