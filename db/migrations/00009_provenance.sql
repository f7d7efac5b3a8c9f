-- +goose Up

-- Provenance (issue 14): what one answer was based on. A row is written
-- once, by the statement batch that stores a model's answer, and never
-- changed: the shared result, and every job and list row that answer
-- reached (cache hits included), point at it. So a cached answer keeps the
-- provenance of the call that made it, and a refresh that replaces the
-- result leaves the rows that got the old answer pointing at the old
-- provenance. One row per model call, not one per list row: a list row
-- keeps the id and what its CSV shows (model, prompt version, addresses),
-- not a copy of the evidence.
CREATE TABLE provenance (
    id             uuid        PRIMARY KEY, -- UUIDv7, made by the writer
    model          text        NOT NULL DEFAULT '',
    prompt_version text        NOT NULL DEFAULT '',
    search         text        NOT NULL DEFAULT '', -- the search provider: none, homepage, brave
    -- what the model was shown: [{"url", "title", "snippet"}], snippets of
    -- at most 300 characters
    evidence       jsonb       NOT NULL DEFAULT '[]',
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- No foreign keys from the answer rows: a provenance row is never deleted
-- while anything could point at it, and a key check on each of a
-- million-row list's updates would be paid for nothing.
ALTER TABLE result ADD COLUMN provenance_id uuid;
ALTER TABLE classify_job_domain ADD COLUMN provenance_id uuid;
ALTER TABLE list_row ADD COLUMN provenance_id uuid;
-- What a list's CSV shows of the provenance, kept on the row: a download
-- of a million rows then joins nothing (a join costs a probe of
-- provenance's key a row, measured at a fifth of the unjoined rate).
-- NDJSON, which carries the whole evidence, joins.
ALTER TABLE list_row ADD COLUMN model text, ADD COLUMN prompt_version text,
    ADD COLUMN evidence_urls text; -- the addresses, separated by spaces, as the CSV has them

-- The answers stored so far keep what they had: model, prompt version and
-- evidence addresses (no titles or snippets were kept).
UPDATE result SET provenance_id = gen_random_uuid() WHERE model <> '' OR prompt_version <> '';
INSERT INTO provenance (id, model, prompt_version, evidence, created_at)
SELECT r.provenance_id, r.model, r.prompt_version,
       coalesce((SELECT jsonb_agg(jsonb_build_object('url', u, 'title', '', 'snippet', '')) FROM unnest(r.evidence) u), '[]'),
       r.classified_at
FROM result r WHERE r.provenance_id IS NOT NULL;
ALTER TABLE result DROP COLUMN model, DROP COLUMN prompt_version, DROP COLUMN evidence;

-- A staged batch request carries its provenance until its answer is stored.
ALTER TABLE llm_batch_item ADD COLUMN search text NOT NULL DEFAULT '',
    ADD COLUMN shown jsonb NOT NULL DEFAULT '[]';
UPDATE llm_batch_item i
SET shown = coalesce((SELECT jsonb_agg(jsonb_build_object('url', u, 'title', '', 'snippet', '')) FROM unnest(i.evidence) u), '[]');
ALTER TABLE llm_batch_item DROP COLUMN evidence;
ALTER TABLE llm_batch_item RENAME COLUMN shown TO evidence;

-- +goose Down
ALTER TABLE llm_batch_item ADD COLUMN urls text[] NOT NULL DEFAULT '{}';
UPDATE llm_batch_item i SET urls = ARRAY(SELECT e->>'url' FROM jsonb_array_elements(i.evidence) e);
ALTER TABLE llm_batch_item DROP COLUMN evidence, DROP COLUMN search;
ALTER TABLE llm_batch_item RENAME COLUMN urls TO evidence;

ALTER TABLE result ADD COLUMN model text NOT NULL DEFAULT '',
    ADD COLUMN prompt_version text NOT NULL DEFAULT '',
    ADD COLUMN evidence text[] NOT NULL DEFAULT '{}';
UPDATE result r SET model = p.model, prompt_version = p.prompt_version,
       evidence = ARRAY(SELECT e->>'url' FROM jsonb_array_elements(p.evidence) e)
FROM provenance p WHERE p.id = r.provenance_id;
ALTER TABLE list_row DROP COLUMN provenance_id, DROP COLUMN model, DROP COLUMN prompt_version, DROP COLUMN evidence_urls;
ALTER TABLE classify_job_domain DROP COLUMN provenance_id;
ALTER TABLE result DROP COLUMN provenance_id;
DROP TABLE provenance;
