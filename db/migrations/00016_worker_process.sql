-- +goose Up

-- Issue 36: a worker process killed with SIGKILL left its jobs running in
-- River for RESCUE_STUCK_AFTER (10 min). Each worker process now renews a
-- lease here every second, under the id its River client writes into
-- river_job.attempted_by; a process whose lease has run out is dead, and
-- the jobs it was running are handed back at once (db.ProcessRescue).
CREATE TABLE worker_process (
    id          text        PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT now(),
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    -- When its jobs were handed back (NULL: not yet, or it is alive).
    rescued_at  timestamptz
);

-- What a running list is waiting for, and its work's last failure, so that
-- its status says why its counts stand still (a provider outage, a lost
-- worker, another job's claim), not only that they do.
ALTER TABLE list
    ADD COLUMN waiting        text,
    ADD COLUMN waiting_since  timestamptz,
    ADD COLUMN last_error     text,
    ADD COLUMN last_error_at  timestamptz,
    ADD COLUMN run_errors     integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE list DROP COLUMN run_errors, DROP COLUMN last_error_at, DROP COLUMN last_error,
    DROP COLUMN waiting_since, DROP COLUMN waiting;
DROP TABLE worker_process;
