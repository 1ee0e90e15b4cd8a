-- callbackd schema v4 on PostgreSQL (migrations/0004 on SQLite): a lease the owning daemon
-- renews while its call waits (a pending approval whose lease ran out is cancelled by any
-- daemon), and the arguments a person edited before approving.
ALTER TABLE approvals ADD COLUMN lease_until bigint NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN approved_args text;
