-- callbackd schema: the user message of each run started through the run API
-- (`POST /v1/sessions/{id}/messages`). The bridge's stored `request` event carries no text;
-- `run_started.input` and `GET /v1/runs/{id}` read it from here. It goes with the run's
-- events (cascade::EVENT_TABLES).
CREATE TABLE run_inputs (
    ns     TEXT NOT NULL,
    run_id TEXT NOT NULL,
    text   TEXT NOT NULL,
    PRIMARY KEY (ns, run_id)
);
