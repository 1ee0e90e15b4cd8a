-- callbackd schema on PostgreSQL: AG-UI threads as aliases of the sessions they started
-- (migrations/0009 on SQLite). The row goes with the agent.
CREATE TABLE ag_ui_threads (
    ns         text COLLATE "C" NOT NULL,
    thread_id  text COLLATE "C" NOT NULL,
    agent_id   text COLLATE "C" NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (ns, thread_id)
);
CREATE INDEX ag_ui_threads_by_agent ON ag_ui_threads (ns, agent_id);
