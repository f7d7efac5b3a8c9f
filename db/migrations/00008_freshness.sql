-- +goose Up

-- Freshness per request (issue 14): what a job or a list accepts as a
-- cached answer, beside the deployment's TTLs. want_max_age: no older than
-- this; want_since: made at this time or after (a refresh: the request's
-- own time). NULL: whatever the TTLs allow.
ALTER TABLE classify_job ADD COLUMN want_max_age interval, ADD COLUMN want_since timestamptz;
ALTER TABLE list ADD COLUMN want_max_age interval, ADD COLUMN want_since timestamptz;

-- +goose Down
ALTER TABLE list DROP COLUMN want_max_age, DROP COLUMN want_since;
ALTER TABLE classify_job DROP COLUMN want_max_age, DROP COLUMN want_since;
