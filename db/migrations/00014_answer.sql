-- +goose Up

-- One word for one idea (issue 23): the yes/no of every classifier is its
-- answer, stored under the same name whatever the question. The column was
-- named after the first classifier (is_cpg); the API shows the answer as
-- "answer" and under each classifier's own field (is_cpg for cpg), named
-- by the classifier's YAML, not by the schema. A rename is a catalog change
-- only: no row is rewritten.
ALTER TABLE result RENAME COLUMN is_cpg TO answer;
ALTER TABLE classify_job_domain RENAME COLUMN is_cpg TO answer;
ALTER TABLE list_row RENAME COLUMN is_cpg TO answer;

-- +goose Down
ALTER TABLE list_row RENAME COLUMN answer TO is_cpg;
ALTER TABLE classify_job_domain RENAME COLUMN answer TO is_cpg;
ALTER TABLE result RENAME COLUMN answer TO is_cpg;
