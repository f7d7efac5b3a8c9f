-- +goose Up

-- Retention (issue 22, item 3): lists were never deleted, nor the
-- provenance of answers. An ended list and its rows are now purged
-- LIST_RETENTION after it ended, in batches, and with them the provenance
-- rows nothing refers to any more.

-- A list keeps the retention it was uploaded under, as it keeps its
-- chunk_rows: the date GET /lists/{id} shows (completed_at + retention)
-- never moves earlier when the setting changes, and is the date the purge
-- keeps, whatever process reads it. Lists from before keep the reviewed
-- default.
ALTER TABLE list ADD COLUMN retention interval NOT NULL DEFAULT '720 hours';
ALTER TABLE list ALTER COLUMN retention DROP DEFAULT;
-- CALLER_MAX_STORED_ROWS sums the rows of a caller's lists; the purge reads
-- the ended lists oldest first.
CREATE INDEX list_caller_idx ON list (caller);
CREATE INDEX list_ended_idx ON list (completed_at) WHERE status IN ('COMPLETED', 'CANCELLED', 'FAILED');
-- A purged list's keys go with it (ON DELETE CASCADE), found by index, not
-- by reading every key; the same for a purged job's.
CREATE INDEX idempotency_key_list_idx ON idempotency_key (list_id) WHERE list_id IS NOT NULL;
CREATE INDEX idempotency_key_job_idx ON idempotency_key (job_id) WHERE job_id IS NOT NULL;

-- A list being purged: its list row is gone (the API answers 404 at once,
-- never a part of its results), and its rows are deleted in batches, from
-- here, after it. No foreign key from list_row to list (00005) is why the
-- ids are kept here.
CREATE TABLE list_purge (
    list_id   uuid        PRIMARY KEY,
    purged_at timestamptz NOT NULL DEFAULT now()
);

-- A key's own cap on its stored list rows (NULL: the reviewed default).
ALTER TABLE api_key ADD COLUMN max_stored_rows bigint CHECK (max_stored_rows > 0);

-- Provenance rows are now deleted (00009 said they never were, and chose no
-- foreign keys for that reason). A foreign key from every table that points
-- at one is what makes that safe: a cache hit copies a result's provenance
-- id onto a new row some time after it read it, and the purge may delete
-- that provenance meanwhile (the result moved on to a newer answer and the
-- last row pointing at the old one was purged). With the key, the row's
-- write either happens first and the purge keeps the provenance, or waits
-- for the purge and fails (its job is retried, and reads the new answer);
-- a dangling id is never stored. The check costs a probe of provenance's
-- primary key per answered row; rows are uploaded with none (COPY pays
-- nothing), and rejected rows never have one.
-- The indexes, partial, are what the purge (and the keys' own check on
-- delete) looks a provenance row up by.
CREATE INDEX list_row_provenance_idx ON list_row (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX classify_job_domain_provenance_idx ON classify_job_domain (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX result_provenance_idx ON result (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX override_provenance_idx ON override (provenance_id);
ALTER TABLE list_row ADD CONSTRAINT list_row_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);
ALTER TABLE classify_job_domain ADD CONSTRAINT classify_job_domain_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);
ALTER TABLE result ADD CONSTRAINT result_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);
ALTER TABLE override ADD CONSTRAINT override_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);

-- Provenance rows that may no longer be referenced: each lost a reference
-- (its rows were purged, its result or override moved on). The purge looks
-- at these, not at the whole table, and deletes those nothing refers to.
CREATE TABLE provenance_candidate (
    id uuid PRIMARY KEY
);
-- Every provenance row is looked at once: the hourly job purge
-- (JOB_RETENTION) has deleted rows before, and left what they pointed at.
INSERT INTO provenance_candidate (id) SELECT id FROM provenance;

-- A result or an override that lets go of a provenance row names it, in
-- the database, so that no writer (the workers' upserts, the operators'
-- CLI) can forget to.
-- +goose StatementBegin
CREATE FUNCTION provenance_released() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO provenance_candidate (id) VALUES (OLD.provenance_id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER result_provenance_released AFTER UPDATE OF provenance_id ON result
    FOR EACH ROW WHEN (OLD.provenance_id IS DISTINCT FROM NEW.provenance_id AND OLD.provenance_id IS NOT NULL)
    EXECUTE FUNCTION provenance_released();
CREATE TRIGGER override_provenance_replaced AFTER UPDATE OF provenance_id ON override
    FOR EACH ROW WHEN (OLD.provenance_id IS DISTINCT FROM NEW.provenance_id)
    EXECUTE FUNCTION provenance_released();
CREATE TRIGGER override_provenance_deleted AFTER DELETE ON override
    FOR EACH ROW EXECUTE FUNCTION provenance_released();

-- +goose Down
DROP TRIGGER override_provenance_deleted ON override;
DROP TRIGGER override_provenance_replaced ON override;
DROP TRIGGER result_provenance_released ON result;
DROP FUNCTION provenance_released();
DROP TABLE provenance_candidate;
ALTER TABLE override DROP CONSTRAINT override_provenance_fkey;
ALTER TABLE result DROP CONSTRAINT result_provenance_fkey;
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_provenance_fkey;
ALTER TABLE list_row DROP CONSTRAINT list_row_provenance_fkey;
DROP INDEX override_provenance_idx;
DROP INDEX result_provenance_idx;
DROP INDEX classify_job_domain_provenance_idx;
DROP INDEX list_row_provenance_idx;
ALTER TABLE api_key DROP COLUMN max_stored_rows;
-- A list purged half-way has its rows deleted now: nothing would find them.
DELETE FROM list_row WHERE list_id IN (SELECT list_id FROM list_purge);
DROP TABLE list_purge;
DROP INDEX idempotency_key_job_idx;
DROP INDEX idempotency_key_list_idx;
DROP INDEX list_ended_idx;
DROP INDEX list_caller_idx;
ALTER TABLE list DROP COLUMN retention;
