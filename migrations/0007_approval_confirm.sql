-- callbackd schema v7: an approval remembers that its tool is marked `confirm = true`, so the
-- console asks the person to confirm an approval in a second step (whichever daemon serves
-- the console, and even after the tool's configuration changed).
ALTER TABLE approvals ADD COLUMN confirm INTEGER NOT NULL DEFAULT 0;
