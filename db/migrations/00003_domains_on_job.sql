-- +goose Up

-- Accept writes one row: the job carries its domain list (the claim check),
-- and a per-domain row is written only once that domain is final. Measured
-- with `go tool task bench`: the job row plus ten domain rows (twenty index
-- entries, ten foreign-key checks) were over half of the accept's database
-- time.
ALTER TABLE classify_job ADD COLUMN inputs text[], ADD COLUMN domains text[],
    -- domains final so far: the per-caller queued-domains limit then reads
    -- job rows, not every domain of every unfinished job
    ADD COLUMN done smallint NOT NULL DEFAULT 0;
UPDATE classify_job j SET
    inputs  = (SELECT array_agg(d.input  ORDER BY d.position) FROM classify_job_domain d WHERE d.job_id = j.id),
    domains = (SELECT array_agg(d.domain ORDER BY d.position) FROM classify_job_domain d WHERE d.job_id = j.id);
UPDATE classify_job SET inputs = '{}', domains = '{}' WHERE inputs IS NULL;
UPDATE classify_job j SET done = (SELECT count(*) FROM classify_job_domain d WHERE d.job_id = j.id AND d.status <> 'PENDING');
ALTER TABLE classify_job ALTER COLUMN inputs SET NOT NULL, ALTER COLUMN domains SET NOT NULL,
    ADD CONSTRAINT classify_job_domains_match CHECK (cardinality(inputs) = cardinality(domains));

DELETE FROM classify_job_domain WHERE status = 'PENDING';
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_job_id_domain_key;
ALTER TABLE classify_job_domain DROP COLUMN input;
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_status_check;
ALTER TABLE classify_job_domain ADD CONSTRAINT classify_job_domain_status_check CHECK (status IN ('COMPLETED', 'FAILED'));
ALTER TABLE classify_job_domain ALTER COLUMN status DROP DEFAULT;

-- +goose Down
ALTER TABLE classify_job_domain ALTER COLUMN status SET DEFAULT 'PENDING';
ALTER TABLE classify_job_domain DROP CONSTRAINT classify_job_domain_status_check;
ALTER TABLE classify_job_domain ADD CONSTRAINT classify_job_domain_status_check CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED'));
ALTER TABLE classify_job_domain ADD COLUMN input text;
UPDATE classify_job_domain d SET input = j.inputs[d.position + 1] FROM classify_job j WHERE j.id = d.job_id;
INSERT INTO classify_job_domain (job_id, position, input, domain)
SELECT j.id, u.ord - 1, u.input, u.domain
FROM classify_job j, unnest(j.inputs, j.domains) WITH ORDINALITY AS u (input, domain, ord)
ON CONFLICT DO NOTHING;
ALTER TABLE classify_job_domain ALTER COLUMN input SET NOT NULL;
ALTER TABLE classify_job_domain ADD CONSTRAINT classify_job_domain_job_id_domain_key UNIQUE (job_id, domain);
ALTER TABLE classify_job DROP CONSTRAINT classify_job_domains_match, DROP COLUMN inputs, DROP COLUMN domains, DROP COLUMN done;
