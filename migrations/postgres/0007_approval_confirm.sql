-- callbackd schema v7 on PostgreSQL (migrations/0007 on SQLite): an approval remembers that
-- its tool is marked `confirm = true` (the console asks for a second, confirming step).
ALTER TABLE approvals ADD COLUMN confirm boolean NOT NULL DEFAULT false;
