-- callbackd schema: the webhooks' outbox (issue 40). One row per event and endpoint,
-- written in the same transaction as what caused it (an approval's insert or change, the
-- store write that ends a run), so a crash loses no delivery. `id` is the event's
-- `webhook-id`, the same on every attempt and for every endpoint. A daemon claims due rows
-- (`claim_owner`, `claim_until`: a lease) before it posts them, so that several daemons on
-- one database deliver each row once; a lease that ran out (its daemon died mid-attempt)
-- makes the row due again.
CREATE TABLE webhook_outbox (
    id          TEXT NOT NULL,
    url         TEXT NOT NULL,
    ns          TEXT NOT NULL,
    type        TEXT NOT NULL,
    run_id      TEXT,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    last_status INTEGER,
    last_error  TEXT,
    last_at     INTEGER,
    claim_owner TEXT,
    claim_until INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (id, url)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (state, next_at);
CREATE INDEX webhook_outbox_by_ns ON webhook_outbox (ns, created_at DESC);
