-- +goose Up

-- The queued-domains limit, counted (issue 15). Summing a caller's
-- unfinished jobs at accept was not exact under READ COMMITTED (concurrent
-- accepts did not see each other's rows: 50 requests of 10 domains against
-- a limit of 100 got 170 in) and cost more the longer the caller's backlog.
-- One row per caller, updated where a job starts counting (accepted, or
-- retried after FAILED) and stops (COMPLETED, FAILED): the check is one
-- row, and its row lock orders a caller's accepts.
CREATE TABLE caller_queue (
    caller  text   PRIMARY KEY,
    domains bigint NOT NULL DEFAULT 0
);

INSERT INTO caller_queue (caller, domains)
SELECT caller, sum(cardinality(domains))
FROM classify_job
WHERE status IN ('PENDING', 'RUNNING')
GROUP BY caller;

-- Only the summing query read it; every accept paid for it.
DROP INDEX classify_job_caller_active_idx;

-- +goose Down
CREATE INDEX classify_job_caller_active_idx ON classify_job (caller) WHERE status IN ('PENDING', 'RUNNING');
DROP TABLE caller_queue;
