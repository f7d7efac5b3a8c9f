-- +goose Up

-- Review (issue 39): people confirm what the model is unsure of, and the
-- service measures its own accuracy from their verdicts.

-- The rules that fill a classifier's queue, which operators read and change
-- (`domainclass review rules`). A classifier without a row has the
-- defaults, the columns' defaults here and review_rules_of below.
CREATE TABLE review_rule (
    classifier     text             PRIMARY KEY,
    -- answers with a confidence at or below this are queued (0: none)
    low_confidence smallint         NOT NULL DEFAULT 3 CHECK (low_confidence BETWEEN 0 AND 5),
    -- the share of the answers above low_confidence queued as the audit
    -- sample, drawn by review_audit_draw
    audit_rate     double precision NOT NULL DEFAULT 0.01 CHECK (audit_rate BETWEEN 0 AND 1),
    updated_by     text             NOT NULL DEFAULT '',
    updated_at     timestamptz      NOT NULL DEFAULT now()
);

-- One answer to review: identified by its provenance (every model answer
-- and every override has its own), so that an answer reviewed once is not
-- queued again until it changes (a new answer, a new provenance).
CREATE TABLE review_item (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    classifier     text        NOT NULL,
    domain         text        NOT NULL,
    provenance_id  uuid        NOT NULL UNIQUE REFERENCES provenance (id),
    -- why it is queued, each once: low_confidence, changed (on refresh),
    -- audit (the random sample of confident answers), disputed (by a caller)
    reasons        text[]      NOT NULL CHECK (cardinality(reasons) > 0 AND
                                   reasons <@ ARRAY['low_confidence', 'changed', 'audit', 'disputed']),
    -- the answer under review, as it was given (the model's, or an override's)
    answer         boolean     NOT NULL,
    confidence     smallint    NOT NULL CHECK (confidence BETWEEN 1 AND 5),
    reasoning      text        NOT NULL DEFAULT '',
    answered_at    timestamptz NOT NULL,
    source         text        NOT NULL CHECK (source IN ('llm', 'override')),
    queued_at      timestamptz NOT NULL DEFAULT now(),
    state          text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'reviewed')),
    -- a skipped item goes to the back of the queue
    skipped_at     timestamptz,
    -- the verdict: the reviewer's answer, why, who, when, and the override
    -- it set; the override it replaced (NULL: none) is kept for an undo
    verdict                 boolean,
    note                    text,
    reviewer                text,
    reviewed_at             timestamptz,
    override_provenance_id  uuid REFERENCES provenance (id),
    previous_override       jsonb,
    previous_provenance_id  uuid REFERENCES provenance (id),
    -- a reviewer's last action on the item, which POST /review/undo takes
    -- back, newest first
    last_action    text        CHECK (last_action IN ('verdict', 'skip')),
    last_actor     text,
    last_action_at timestamptz,
    CHECK ((state = 'reviewed') = (verdict IS NOT NULL))
);
CREATE INDEX review_item_queue_idx ON review_item (classifier, skipped_at NULLS FIRST, id) WHERE state = 'queued';
CREATE INDEX review_item_reviewed_idx ON review_item (classifier, id) WHERE state = 'reviewed';
CREATE INDEX review_item_undo_idx ON review_item (last_actor, last_action_at DESC) WHERE last_action IS NOT NULL;
-- The provenance purge asks whether anything refers to a row.
CREATE INDEX review_item_override_provenance_idx ON review_item (override_provenance_id) WHERE override_provenance_id IS NOT NULL;
CREATE INDEX review_item_previous_provenance_idx ON review_item (previous_provenance_id) WHERE previous_provenance_id IS NOT NULL;

-- A caller's dispute of an answer: one per caller and answer (a second is
-- the first again).
CREATE TABLE review_dispute (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id    bigint      NOT NULL REFERENCES review_item (id) ON DELETE CASCADE,
    caller     text        NOT NULL,
    note       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (item_id, caller)
);

-- The audit draw of an answer: a number in [0, 1) from the hash of its
-- provenance id, so that the sample is random (the ids are) yet the same
-- on every look, and independent of the answer and its confidence.
CREATE FUNCTION review_audit_draw(id uuid) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('x' || left(md5(id::text), 8))::bit(32)::bigint / 4294967296.0;

-- The reasons a model's answer is queued, by the rules of its classifier:
-- low confidence, changed (replaced is the COMPLETED answer it replaced,
-- NULL for none) and the audit draw, made only above the low-confidence
-- bar so that the audit sample is an unbiased one of the confident answers.
CREATE FUNCTION review_reasons(confidence smallint, id uuid, answer boolean, replaced boolean,
                               low_confidence smallint, audit_rate double precision) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN array_remove(ARRAY[
    CASE WHEN confidence <= coalesce(low_confidence, 3) THEN 'low_confidence' END,
    CASE WHEN replaced IS NOT NULL AND replaced IS DISTINCT FROM answer THEN 'changed' END,
    CASE WHEN confidence > coalesce(low_confidence, 3) AND review_audit_draw(id) < coalesce(audit_rate, 0.01) THEN 'audit' END
], NULL);

-- The queue is filled from the answers as they are stored, in the
-- database, so that no writer of results (the classify and list workers'
-- batches, one row or many per statement) can forget to: a statement
-- trigger reads the statement's rows at once (transition tables). It runs
-- as the owner: the worker's role needs nothing of the review tables.
-- +goose StatementBegin
CREATE FUNCTION review_queue_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO review_item (classifier, domain, provenance_id, reasons, answer, confidence, reasoning, answered_at, source)
    SELECT n.classifier, n.domain, n.provenance_id, q.reasons, n.answer, n.confidence, coalesce(n.reasoning, ''), n.classified_at, 'llm'
    FROM review_new n
    LEFT JOIN review_rule rr ON rr.classifier = n.classifier
    CROSS JOIN LATERAL (SELECT review_reasons(n.confidence, n.provenance_id, n.answer, NULL,
                                              rr.low_confidence, rr.audit_rate) AS reasons) q
    WHERE n.status = 'COMPLETED' AND n.provenance_id IS NOT NULL AND n.answer IS NOT NULL
      AND n.confidence IS NOT NULL AND cardinality(q.reasons) > 0
    ON CONFLICT (provenance_id) DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION review_queue_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO review_item (classifier, domain, provenance_id, reasons, answer, confidence, reasoning, answered_at, source)
    SELECT n.classifier, n.domain, n.provenance_id, q.reasons, n.answer, n.confidence, coalesce(n.reasoning, ''), n.classified_at, 'llm'
    FROM review_new n
    JOIN review_old o ON o.domain = n.domain AND o.classifier = n.classifier
    LEFT JOIN review_rule rr ON rr.classifier = n.classifier
    CROSS JOIN LATERAL (SELECT review_reasons(n.confidence, n.provenance_id, n.answer,
                                              CASE WHEN o.status = 'COMPLETED' THEN o.answer END,
                                              rr.low_confidence, rr.audit_rate) AS reasons) q
    WHERE n.status = 'COMPLETED' AND n.provenance_id IS NOT NULL AND n.answer IS NOT NULL
      AND n.confidence IS NOT NULL AND n.provenance_id IS DISTINCT FROM o.provenance_id
      AND cardinality(q.reasons) > 0
    ON CONFLICT (provenance_id) DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER result_review_inserted AFTER INSERT ON result
    REFERENCING NEW TABLE AS review_new
    FOR EACH STATEMENT EXECUTE FUNCTION review_queue_inserted();
CREATE TRIGGER result_review_updated AFTER UPDATE ON result
    REFERENCING OLD TABLE AS review_old NEW TABLE AS review_new
    FOR EACH STATEMENT EXECUTE FUNCTION review_queue_updated();

-- +goose Down
DROP TRIGGER result_review_updated ON result;
DROP TRIGGER result_review_inserted ON result;
DROP FUNCTION review_queue_updated();
DROP FUNCTION review_queue_inserted();
DROP FUNCTION review_reasons(smallint, uuid, boolean, boolean, smallint, double precision);
DROP FUNCTION review_audit_draw(uuid);
DROP TABLE review_dispute;
DROP TABLE review_item;
DROP TABLE review_rule;
