-- callbackd schema v4: approvals owned by the daemon that holds the call, and edited arguments.

-- owner: the instance id of the daemon whose tool call waits on a pending approval.
-- lease_until (epoch ms): the owner renews it while it waits; a pending approval whose lease
-- has run out belongs to a daemon that is gone, and any daemon cancels it.
-- approved_args: the arguments the tool ran with when a person edited them before approving
-- (JSON text; NULL: it ran with `args`, or did not run).
ALTER TABLE approvals ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN approved_args TEXT;
