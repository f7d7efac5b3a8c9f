-- +goose Up

-- A list survives a bad hour (issue 27). POST /lists/{id}/retry queues a
-- list's FAILED and never-answered rows again, as chunks of a new pass:
-- River keeps a chunk's finished job for a day and its jobs are unique by
-- their args, so a chunk queued again needs args of its own. retries is the
-- list's pass (0 for the upload's), carried by every chunk job queued.
ALTER TABLE list ADD COLUMN retries integer NOT NULL DEFAULT 0;

-- GET /lists: a caller's lists, newest first, a page at a time.
CREATE INDEX list_caller_created_idx ON list (caller, created_at DESC, id DESC);

-- +goose Down
DROP INDEX list_caller_created_idx;
ALTER TABLE list DROP COLUMN retries;
