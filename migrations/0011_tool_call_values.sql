-- callbackd schema: callbackd's record of what each custom tool call ran with and what the
-- tool returned (issue 35), so every view of a run tells what ran, not what the model asked:
-- `arguments` is set when a person changed them before approving (an edited approval, an
-- answered question; NULL: the tool ran with the model's own), `result` is the tool's own
-- JSON as it returned it (`{"error": "..."}` for a call that failed or never ran), not the
-- bridge's MCP wrapper (which stays in the bridge's stored event).
ALTER TABLE tool_calls ADD COLUMN arguments TEXT;
ALTER TABLE tool_calls ADD COLUMN result TEXT;
