-- +goose Up

-- A statement that gives many list rows their answers at once (issue 37:
-- a list's answered rows, a provider batch's answers) does not lock each
-- row's provenance as list_row_provenance_exists does, a trigger call and
-- a row lock per row (7 of the 17 seconds of a million-row update,
-- measured). It holds the provenance purge off instead: the purge takes
-- the schema's provenance lock exclusively (db.ProvenancePurge), such a
-- statement takes it shared before it reads the ids it writes (each from a
-- foreign key: a result's, an override's, or a provenance row it wrote
-- itself), and says so for its transaction (domainclass.provenance_held),
-- so the row trigger is skipped. Every other write is checked as before.
DROP TRIGGER list_row_provenance_exists ON list_row;
CREATE TRIGGER list_row_provenance_exists AFTER UPDATE OF provenance_id ON list_row
    FOR EACH ROW WHEN (NEW.provenance_id IS NOT NULL AND NEW.provenance_id IS DISTINCT FROM OLD.provenance_id
                       AND current_setting('domainclass.provenance_held', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION list_row_provenance_exists();

-- +goose Down
DROP TRIGGER list_row_provenance_exists ON list_row;
CREATE TRIGGER list_row_provenance_exists AFTER UPDATE OF provenance_id ON list_row
    FOR EACH ROW WHEN (NEW.provenance_id IS NOT NULL AND NEW.provenance_id IS DISTINCT FROM OLD.provenance_id)
    EXECUTE FUNCTION list_row_provenance_exists();
