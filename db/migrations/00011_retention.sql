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
-- here, after it: rows (numbered 1..rows) from next_row on. No foreign key
-- from list_row to list (00005) is why the ids are kept here.
CREATE TABLE list_purge (
    list_id   uuid        PRIMARY KEY,
    rows      integer     NOT NULL,
    next_row  integer     NOT NULL DEFAULT 1,
    purged_at timestamptz NOT NULL DEFAULT now()
);

-- A key's own cap on its stored list rows (NULL: the reviewed default).
ALTER TABLE api_key ADD COLUMN max_stored_rows bigint CHECK (max_stored_rows > 0);

-- Provenance rows are now deleted (00009 said they never were, and chose no
-- foreign keys for that reason). That is safe only if the database refuses
-- a reference to a deleted one: a cache hit copies a result's provenance id
-- onto a new row some time after it read it, and the purge may delete that
-- provenance meanwhile (the result moved on to a newer answer and the last
-- row pointing at the old one was purged). With the check, the row's write
-- either happens first, holding the provenance row's key share lock, and
-- the purge, which waits for it, then sees the reference and keeps the
-- provenance; or it waits for the purge and fails (its job is retried, and
-- reads the new answer). A dangling id is never stored.
-- result, override and classify_job_domain get foreign keys. list_row gets
-- the same two checks as triggers instead: a foreign key's insert check
-- runs for every row of a million-row COPY even when its id is NULL (1.4 s
-- a million, measured), and rows are uploaded without one; the triggers
-- run only when an answer gives a row its provenance, and when provenance
-- is deleted.
-- The indexes, partial, are what the purge and the checks on delete look a
-- provenance row up by.
CREATE INDEX list_row_provenance_idx ON list_row (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX classify_job_domain_provenance_idx ON classify_job_domain (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX result_provenance_idx ON result (provenance_id) WHERE provenance_id IS NOT NULL;
CREATE INDEX override_provenance_idx ON override (provenance_id);
ALTER TABLE classify_job_domain ADD CONSTRAINT classify_job_domain_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);
ALTER TABLE result ADD CONSTRAINT result_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);
ALTER TABLE override ADD CONSTRAINT override_provenance_fkey
    FOREIGN KEY (provenance_id) REFERENCES provenance (id);

-- A list row given a provenance id: the provenance row must exist, and is
-- locked (key share) until the write commits, as a foreign key's check
-- does: after the statement, as the owner (a lock needs more than the
-- worker's SELECT), so that a statement may write the provenance and the
-- rows that point at it in any order.
-- +goose StatementBegin
CREATE FUNCTION list_row_provenance_exists() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM FROM provenance WHERE id = NEW.provenance_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING MESSAGE = format(
            'list row %s/%s refers to provenance %s, which does not exist', NEW.list_id, NEW.row, NEW.provenance_id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER list_row_provenance_exists AFTER UPDATE OF provenance_id ON list_row
    FOR EACH ROW WHEN (NEW.provenance_id IS NOT NULL AND NEW.provenance_id IS DISTINCT FROM OLD.provenance_id)
    EXECUTE FUNCTION list_row_provenance_exists();
-- Provenance deleted: no list row may refer to it, looked at once the
-- delete holds the row (a write that held it first has committed by then).
-- +goose StatementBegin
CREATE FUNCTION provenance_not_in_list_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM list_row WHERE provenance_id = OLD.id) THEN
        RAISE foreign_key_violation USING MESSAGE = format('provenance %s is still referred to from list_row', OLD.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER provenance_not_in_list_rows AFTER DELETE ON provenance
    FOR EACH ROW EXECUTE FUNCTION provenance_not_in_list_rows();

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
DROP TRIGGER provenance_not_in_list_rows ON provenance;
DROP FUNCTION provenance_not_in_list_rows();
DROP TRIGGER list_row_provenance_exists ON list_row;
DROP FUNCTION list_row_provenance_exists();
ALTER TABLE override DROP CONSTRAINT override_provenance_fkey;
ALTER TABLE result DROP CONSTRAINT result_provenance_fkey;
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_provenance_fkey;
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
