-- callbackd schema: what the run API filters and searches on (issue 21), copied out of the
-- stored documents by the database itself (generated columns), so every way a document is
-- written (the bridge's store calls, `callbackd restore`, copy-store) fills them, and the
-- documents stay byte for byte what the bridge sent. A key of another JSON type than the
-- column's, or a document that is not JSON at all (a damaged row), is NULL (0 for
-- created_at), never an error: a write or a read of such a row must not fail on them.

-- GET /v1/runs: newest first across sessions (`createdAt`, `runId`), optionally within one
-- session; `status` and `result` for its filters.
ALTER TABLE runs ADD COLUMN created_at REAL GENERATED ALWAYS AS (
    CASE WHEN NOT json_valid(doc) THEN 0 WHEN json_type(doc, '$.createdAt') IN ('integer', 'real')
         THEN json_extract(doc, '$.createdAt') ELSE 0 END) VIRTUAL;
ALTER TABLE runs ADD COLUMN status TEXT GENERATED ALWAYS AS (
    CASE WHEN NOT json_valid(doc) THEN NULL WHEN json_type(doc, '$.status') = 'text' THEN json_extract(doc, '$.status') END) VIRTUAL;
ALTER TABLE runs ADD COLUMN result TEXT GENERATED ALWAYS AS (
    CASE WHEN NOT json_valid(doc) THEN NULL WHEN json_type(doc, '$.result') = 'text' THEN json_extract(doc, '$.result') END) VIRTUAL;
CREATE INDEX runs_by_created ON runs (ns, created_at DESC, run_id DESC);
CREATE INDEX runs_by_agent_created ON runs (ns, agent_id, created_at DESC, run_id DESC);

-- GET /v1/sessions?q=&status=: a session's name (PATCH /v1/sessions/{id}) and status.
ALTER TABLE agents ADD COLUMN name TEXT GENERATED ALWAYS AS (
    CASE WHEN NOT json_valid(doc) THEN NULL WHEN json_type(doc, '$.name') = 'text' THEN json_extract(doc, '$.name') END) VIRTUAL;
ALTER TABLE agents ADD COLUMN status TEXT GENERATED ALWAYS AS (
    CASE WHEN NOT json_valid(doc) THEN NULL WHEN json_type(doc, '$.status') = 'text' THEN json_extract(doc, '$.status') END) VIRTUAL;

-- A tool call held for approval: how long it waited for the person (`waited_ms`), set when
-- it is approved (and started_at moves to that moment) or when it ends without running.
ALTER TABLE tool_calls ADD COLUMN waited_ms INTEGER;
