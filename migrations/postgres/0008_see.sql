-- callbackd schema on PostgreSQL: the columns of migrations/0008_see.sql (SQLite), stored
-- generated columns over the `text` documents. The helpers never fail a write: a document
-- jsonb cannot hold (a \u0000 in a string) or a key of another type gives NULL (0 for
-- created_at), as on SQLite.

CREATE FUNCTION callbackd_doc_text(doc text, key text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF jsonb_typeof(doc::jsonb -> key) = 'string' THEN
        RETURN doc::jsonb ->> key;
    END IF;
    RETURN NULL;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

CREATE FUNCTION callbackd_doc_number(doc text, key text) RETURNS double precision
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF jsonb_typeof(doc::jsonb -> key) = 'number' THEN
        RETURN (doc::jsonb ->> key)::double precision;
    END IF;
    RETURN 0;
EXCEPTION WHEN others THEN
    RETURN 0;
END $$;

ALTER TABLE runs
    ADD COLUMN created_at double precision
        GENERATED ALWAYS AS (callbackd_doc_number(doc, 'createdAt')) STORED,
    ADD COLUMN status text COLLATE "C" GENERATED ALWAYS AS (callbackd_doc_text(doc, 'status')) STORED,
    ADD COLUMN result text GENERATED ALWAYS AS (callbackd_doc_text(doc, 'result')) STORED;
CREATE INDEX runs_by_created ON runs (ns, created_at DESC, run_id DESC);
CREATE INDEX runs_by_agent_created ON runs (ns, agent_id, created_at DESC, run_id DESC);

ALTER TABLE agents
    ADD COLUMN name text GENERATED ALWAYS AS (callbackd_doc_text(doc, 'name')) STORED,
    ADD COLUMN status text COLLATE "C" GENERATED ALWAYS AS (callbackd_doc_text(doc, 'status')) STORED;

-- A tool call held for approval: how long it waited for the person (`waited_ms`).
ALTER TABLE tool_calls ADD COLUMN waited_ms bigint;
