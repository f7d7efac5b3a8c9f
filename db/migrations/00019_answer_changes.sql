-- +goose Up

-- Answers that changed (issue 39, item 5): the served answer of a
-- (classifier, domain) went from one yes/no to the other, by a refresh (a
-- model's new answer replacing a COMPLETED one), an override (set,
-- replaced or deleted by an operator) or a review (a reviewer's verdict,
-- which is an override). GET /domains/changes reads it, and the fan-out
-- sends answer.changed to the callers that received the old answer.
--
-- The rule, for every writer: nobody inserts here by hand. The triggers
-- below record every change of result and override, so that set-based
-- writers (the list chunk path's multi-row upserts, `override import`)
-- record theirs in the same statement, with no call per row. A writer
-- tells a review apart from an operator's override by naming the cause in
-- its transaction:
--     SET LOCAL domainclass.cause = 'review';
-- before it sets or deletes the override (db.CauseReview). Without it, an
-- override's change is cause 'override'.
--
-- A change is a different yes/no; a new confidence alone, or an override
-- that confirms the answer served, is not one. A domain with no answer
-- before (no COMPLETED result) has nothing to change, and an override
-- deleted with no model answer behind it leaves no answer to change to:
-- neither is recorded (the next request asks the model).
--
-- The provenance ids are not foreign keys: the log outlives the records the
-- purge deletes once nothing answered by them is kept.
CREATE TABLE answer_change (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    classifier        text        NOT NULL,
    domain            text        NOT NULL,
    old_provenance_id uuid,
    new_provenance_id uuid,
    old_answer        boolean,
    new_answer        boolean,
    old_confidence    smallint,
    new_confidence    smallint,
    cause             text        NOT NULL CHECK (cause IN ('review', 'override', 'refresh')),
    changed_at        timestamptz NOT NULL DEFAULT now(),
    -- The order the change is published in (GET /domains/changes pages by
    -- it): given by the fan-out, one transaction at a time, so that a page
    -- read by seq never skips a change committed later with a smaller id
    -- (identity values are taken at insert, not at commit).
    seq               bigint      UNIQUE
);
-- The fan-out reads the changes not yet published, oldest first.
CREATE INDEX answer_change_unpublished_idx ON answer_change (id) WHERE seq IS NULL;
-- GET /domains/changes: a classifier's published changes, after a cursor.
CREATE INDEX answer_change_classifier_seq_idx ON answer_change (classifier, seq) WHERE seq IS NOT NULL;

-- Who was told of a change (an answer.changed queued by the fan-out), and
-- the answer it was told of (the change's new provenance): a job or list
-- told that an answer changed holds the new one from then on, so it is told
-- when that one changes in turn (a reviewer's undo, an answer that flips
-- back), as the rows that got an answer are. Kept as long as its job or
-- list: the purges' deletes take it with them.
CREATE TABLE answer_change_notice (
    change_id     bigint NOT NULL REFERENCES answer_change (id),
    provenance_id uuid,
    job_id        uuid   REFERENCES classify_job (id) ON DELETE CASCADE,
    list_id       uuid   REFERENCES list (id) ON DELETE CASCADE,
    CHECK ((job_id IS NULL) <> (list_id IS NULL))
);
CREATE INDEX answer_change_notice_provenance_idx ON answer_change_notice (provenance_id);
CREATE INDEX answer_change_notice_job_idx ON answer_change_notice (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX answer_change_notice_list_idx ON answer_change_notice (list_id) WHERE list_id IS NOT NULL;

-- A refresh: a COMPLETED answer replaced by a COMPLETED one with another
-- yes/no. FOR EACH ROW with a WHEN, not a statement trigger with
-- transition tables: the WHEN is evaluated without calling the function,
-- so the rows whose answer stays (nearly all) cost a comparison, and no
-- statement has to copy its rows into a transition table. The owner's
-- rights (SECURITY DEFINER): the roles need no INSERT here, so neither the
-- api nor the worker can write a change of its own making.
-- +goose StatementBegin
CREATE FUNCTION answer_change_refreshed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- An override answers the domain: the model's new answer is not served.
    IF EXISTS (SELECT FROM override WHERE classifier = NEW.classifier AND domain = NEW.domain) THEN
        RETURN NULL;
    END IF;
    INSERT INTO answer_change (classifier, domain, old_provenance_id, new_provenance_id, old_answer, new_answer,
                               old_confidence, new_confidence, cause)
    VALUES (NEW.classifier, NEW.domain, OLD.provenance_id, NEW.provenance_id, OLD.answer, NEW.answer,
            OLD.confidence, NEW.confidence, 'refresh');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER result_answer_changed AFTER UPDATE ON result
    FOR EACH ROW WHEN (OLD.status = 'COMPLETED' AND NEW.status = 'COMPLETED' AND OLD.answer IS DISTINCT FROM NEW.answer)
    EXECUTE FUNCTION answer_change_refreshed();

-- An override set, replaced or deleted: the served answer before and after
-- (the model's COMPLETED answer stands where there is no override).
-- +goose StatementBegin
CREATE FUNCTION answer_change_overridden() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    why text := CASE WHEN current_setting('domainclass.cause', true) = 'review' THEN 'review' ELSE 'override' END;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO answer_change (classifier, domain, old_provenance_id, new_provenance_id, old_answer, new_answer,
                                   old_confidence, new_confidence, cause)
        SELECT NEW.classifier, NEW.domain, r.provenance_id, NEW.provenance_id, r.answer, NEW.answer,
               r.confidence, NEW.confidence, why
        FROM result r
        WHERE r.domain = NEW.domain AND r.classifier = NEW.classifier AND r.status = 'COMPLETED'
          AND r.answer IS DISTINCT FROM NEW.answer;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.answer IS DISTINCT FROM NEW.answer THEN
            INSERT INTO answer_change (classifier, domain, old_provenance_id, new_provenance_id, old_answer, new_answer,
                                       old_confidence, new_confidence, cause)
            VALUES (NEW.classifier, NEW.domain, OLD.provenance_id, NEW.provenance_id, OLD.answer, NEW.answer,
                    OLD.confidence, NEW.confidence, why);
        END IF;
    ELSE
        INSERT INTO answer_change (classifier, domain, old_provenance_id, new_provenance_id, old_answer, new_answer,
                                   old_confidence, new_confidence, cause)
        SELECT OLD.classifier, OLD.domain, OLD.provenance_id, r.provenance_id, OLD.answer, r.answer,
               OLD.confidence, r.confidence, why
        FROM result r
        WHERE r.domain = OLD.domain AND r.classifier = OLD.classifier AND r.status = 'COMPLETED'
          AND r.answer IS DISTINCT FROM OLD.answer;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER override_answer_changed AFTER INSERT OR UPDATE OR DELETE ON override
    FOR EACH ROW EXECUTE FUNCTION answer_change_overridden();

-- +goose Down
DROP TRIGGER override_answer_changed ON override;
DROP FUNCTION answer_change_overridden();
DROP TRIGGER result_answer_changed ON result;
DROP FUNCTION answer_change_refreshed();
DROP TABLE answer_change_notice;
DROP TABLE answer_change;
