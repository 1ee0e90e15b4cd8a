-- callbackd schema on PostgreSQL: the webhooks' outbox of migrations/0009_webhooks.sql
-- (SQLite). Daemons claim due rows with `FOR UPDATE SKIP LOCKED`, then a lease.
CREATE TABLE webhook_outbox (
    id          text NOT NULL,
    url         text NOT NULL,
    ns          text NOT NULL,
    type        text NOT NULL,
    run_id      text,
    body        text NOT NULL,
    created_at  bigint NOT NULL,
    state       text NOT NULL DEFAULT 'pending',
    attempts    bigint NOT NULL DEFAULT 0,
    next_at     bigint NOT NULL,
    last_status bigint,
    last_error  text,
    last_at     bigint,
    claim_owner text,
    claim_until bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (id, url)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (state, next_at);
CREATE INDEX webhook_outbox_by_ns ON webhook_outbox (ns, created_at DESC);
