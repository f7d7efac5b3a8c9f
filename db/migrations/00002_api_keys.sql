-- +goose Up

-- Callers' API keys. Only a SHA-256 of each key is kept: keys are 256 bits
-- of randomness, so a fast hash is enough, and lookup by hash means the
-- time to answer says nothing about how close a guess was.
CREATE TABLE api_key (
    name               text        PRIMARY KEY,
    key_hash           bytea       NOT NULL UNIQUE,
    key_prefix         text        NOT NULL, -- the first characters, to recognise a key in a list
    rate_per_minute    integer     CHECK (rate_per_minute > 0),    -- NULL: the reviewed default
    max_queued_domains integer     CHECK (max_queued_domains > 0), -- NULL: the reviewed default
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_used_at       timestamptz,
    revoked_at         timestamptz
);

-- The queued-domains limit counts a caller's unfinished jobs.
CREATE INDEX classify_job_caller_active_idx ON classify_job (caller) WHERE status IN ('PENDING', 'RUNNING');

-- +goose Down
DROP INDEX classify_job_caller_active_idx;
DROP TABLE api_key;
