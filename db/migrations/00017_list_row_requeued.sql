-- +goose Up

-- Least privilege for the api role (issue 36): a retry queues a list's
-- FAILED rows again, and the api may change a row's status for that, never
-- its answer. A FAILED row made PENDING keeps nothing of its failed attempt:
-- the table clears it, so the retry's statement names the status alone,
-- and the api's role holds UPDATE on that column of list_row, not on the
-- answer, the reasoning or the error that other callers' results show.
-- (Numbered 00016: 00015 is on main, from another branch of issue 36.)
-- +goose StatementBegin
CREATE FUNCTION list_row_requeued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.error := NULL;
    NEW.classified_at := NULL;
    NEW.answer := NULL;
    NEW.confidence := NULL;
    NEW.reasoning := NULL;
    NEW.source := NULL;
    NEW.provenance_id := NULL;
    NEW.model := NULL;
    NEW.prompt_version := NULL;
    NEW.evidence_urls := NULL;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER list_row_requeued BEFORE UPDATE OF status ON list_row
    FOR EACH ROW WHEN (OLD.status = 'FAILED' AND NEW.status = 'PENDING')
    EXECUTE FUNCTION list_row_requeued();

-- +goose Down
DROP TRIGGER list_row_requeued ON list_row;
DROP FUNCTION list_row_requeued();
