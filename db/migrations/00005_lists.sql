-- +goose Up

-- A list: one upload of up to a million rows, answered in chunks. Its
-- progress is kept as counters, updated in the transaction that finishes
-- each row, so that its status is one row read however long the list.
CREATE TABLE list (
    id           uuid        PRIMARY KEY,
    caller       text        NOT NULL,
    classifier   text        NOT NULL,
    status       text        NOT NULL DEFAULT 'PENDING'
                             CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')),
    error        text,
    callback_url text,
    rows         integer     NOT NULL, -- every row uploaded, rejected ones too
    domains      integer     NOT NULL, -- distinct valid domains
    duplicates   integer     NOT NULL, -- valid rows whose domain an earlier row has
    rejected     integer     NOT NULL,
    chunk_rows   integer     NOT NULL, -- rows per chunk job
    chunks       integer     NOT NULL,
    next_chunk   integer     NOT NULL, -- the next chunk to queue (chunks are fed a few at a time)
    -- rows final so far, by outcome and by where the answer came from
    done         integer     NOT NULL DEFAULT 0,
    completed    integer     NOT NULL DEFAULT 0,
    failed       integer     NOT NULL DEFAULT 0,
    known        integer     NOT NULL DEFAULT 0,
    cache        integer     NOT NULL DEFAULT 0,
    llm          integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    completed_at timestamptz
);
-- CALLER_MAX_ACTIVE_LISTS counts a caller's lists not yet ended.
CREATE INDEX list_caller_active_idx ON list (caller) WHERE status IN ('PENDING', 'RUNNING');

-- The rows of a list, in upload order (row from 1). A row whose domain an
-- earlier row has points at that row (first_row) and gets its answer in the
-- same statement. No foreign key to list: checking one per row would cost a
-- third of a million-row COPY; rows are only written with their list, in
-- the upload's transaction.
CREATE TABLE list_row (
    list_id       uuid        NOT NULL,
    row           integer     NOT NULL,
    input         text        NOT NULL,
    ref           text,
    domain        text,        -- NULL when REJECTED
    first_row     integer,     -- set on duplicates only
    status        text        NOT NULL
                              CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'REJECTED')),
    is_cpg        boolean,
    confidence    smallint    CHECK (confidence BETWEEN 1 AND 5),
    reasoning     text,
    source        text        CHECK (source IN ('known', 'cache', 'llm')),
    error         text,        -- the reason of a REJECTED or FAILED row
    classified_at timestamptz,
    PRIMARY KEY (list_id, row)
);
-- Duplicates are found from their first row when it is answered; only
-- duplicates are in this index.
CREATE INDEX list_row_first_row_idx ON list_row (list_id, first_row) WHERE first_row IS NOT NULL;

-- An Idempotency-Key names a job or a list.
ALTER TABLE idempotency_key ALTER COLUMN job_id DROP NOT NULL,
    ADD COLUMN list_id uuid REFERENCES list (id) ON DELETE CASCADE,
    ADD CONSTRAINT idempotency_key_one_target CHECK ((job_id IS NULL) <> (list_id IS NULL));

-- What a model call cost, kept with its answer: the list estimate reads
-- the recent calls' latency and tokens.
ALTER TABLE result ADD COLUMN latency_ms integer, ADD COLUMN prompt_tokens integer,
    ADD COLUMN completion_tokens integer;
CREATE INDEX result_classified_at_idx ON result (classified_at);

-- +goose Down
DROP INDEX result_classified_at_idx;
ALTER TABLE result DROP COLUMN latency_ms, DROP COLUMN prompt_tokens, DROP COLUMN completion_tokens;
DELETE FROM idempotency_key WHERE list_id IS NOT NULL;
ALTER TABLE idempotency_key DROP CONSTRAINT idempotency_key_one_target, DROP COLUMN list_id,
    ALTER COLUMN job_id SET NOT NULL;
DROP TABLE list_row;
DROP TABLE list;
