-- +goose Up

-- No query reads jobs by (caller, created_at): the queued-domains limit uses
-- classify_job_caller_active_idx. Every accept paid for this index anyway
-- (docs/BENCHMARKS.md). Add it back with the query that needs it.
DROP INDEX classify_job_caller_created_at_idx;

-- +goose Down
CREATE INDEX classify_job_caller_created_at_idx ON classify_job (caller, created_at DESC);
