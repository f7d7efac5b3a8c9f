-- +goose Up

-- Overrides (issue 14): an operator's verdict on a domain, yes or no, that
-- answers it before the cache and the model. They replace the yes-only
-- known_company list. The model's answers stay in result, apart: an
-- override is never overwritten by one, and deleting it lets the cache
-- and the model answer again.
--
-- Who set an override, when and why is written, as it was set, in a
-- provenance row of its own (set_by, note, created_at = set_at); the
-- override and every job or list row it answered point at that row, so a
-- row keeps the override it got after the override is changed or deleted.
ALTER TABLE provenance ADD COLUMN set_by text NOT NULL DEFAULT '',
    ADD COLUMN note text NOT NULL DEFAULT '';

CREATE TABLE override (
    classifier    text        NOT NULL,
    domain        text        NOT NULL,
    answer        boolean     NOT NULL,
    confidence    smallint    NOT NULL CHECK (confidence BETWEEN 1 AND 5),
    note          text        NOT NULL CHECK (note <> ''),
    set_by        text        NOT NULL CHECK (set_by <> ''),
    set_at        timestamptz NOT NULL DEFAULT now(),
    provenance_id uuid        NOT NULL,
    PRIMARY KEY (classifier, domain)
);

-- Every known company becomes a yes override, as `known import` now makes
-- them. The CTE is evaluated once (gen_random_uuid is volatile), so the
-- provenance row and the override get the same id.
WITH known AS (
    SELECT classifier, domain, format('Listed as a known %s company (%s).', upper(classifier), name) AS note,
           updated_at, gen_random_uuid() AS id
    FROM known_company
), p AS (
    INSERT INTO provenance (id, set_by, note, created_at)
    SELECT id, 'known import', note, updated_at FROM known
)
INSERT INTO override (classifier, domain, answer, confidence, note, set_by, set_at, provenance_id)
SELECT classifier, domain, true, 5, note, 'known import', updated_at, id FROM known;

DROP TABLE known_company;

-- Answers may come from an override; 'known' stays for the rows answered
-- from the known list before.
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_source_check,
    ADD CONSTRAINT classify_job_domain_source_check CHECK (source IN ('override', 'known', 'cache', 'llm'));
ALTER TABLE list_row DROP CONSTRAINT list_row_source_check,
    ADD CONSTRAINT list_row_source_check CHECK (source IN ('override', 'known', 'cache', 'llm'));

-- A list counts the rows overrides answered; known keeps the count of a
-- list answered from the known list before.
ALTER TABLE list ADD COLUMN override integer NOT NULL DEFAULT 0;

-- +goose Down

-- The yes overrides go back to the known list (its name from the note the
-- Up wrote, else the note); no overrides have no place there and are lost.
CREATE TABLE known_company (
    classifier text        NOT NULL,
    domain     text        NOT NULL,
    name       text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (classifier, domain)
);
INSERT INTO known_company (classifier, domain, name, updated_at)
SELECT classifier, domain, coalesce(substring(note FROM '^Listed as a known \S+ company \((.*)\)\.$'), note), set_at
FROM override WHERE answer;

-- Rows an override answered read as answered from outside the model, which
-- is what 'known' meant, with no provenance: who set them and why is lost.
UPDATE list SET known = known + override WHERE override > 0;
ALTER TABLE list DROP COLUMN override;
UPDATE list_row SET source = 'known', provenance_id = NULL WHERE source = 'override';
UPDATE classify_job_domain SET source = 'known', provenance_id = NULL WHERE source = 'override';
DELETE FROM provenance WHERE set_by <> '';
ALTER TABLE list_row DROP CONSTRAINT list_row_source_check,
    ADD CONSTRAINT list_row_source_check CHECK (source IN ('known', 'cache', 'llm'));
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_source_check,
    ADD CONSTRAINT classify_job_domain_source_check CHECK (source IN ('known', 'cache', 'llm'));

DROP TABLE override;
ALTER TABLE provenance DROP COLUMN set_by, DROP COLUMN note;
