-- +goose Up

-- One caller's request: a list of domains and one classifier.
CREATE TABLE classify_job (
    id            uuid        PRIMARY KEY,
    caller        text        NOT NULL,
    classifier    text        NOT NULL,
    status        text        NOT NULL DEFAULT 'PENDING'
                              CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED')),
    error         text,
    callback_url  text,
    river_job_id  bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    completed_at  timestamptz
);
CREATE INDEX classify_job_caller_created_at_idx ON classify_job (caller, created_at DESC);

-- The domains of a job in the caller's order, each with this job's answer
-- (and where it came from) once it is final.
CREATE TABLE classify_job_domain (
    job_id        uuid        NOT NULL REFERENCES classify_job (id) ON DELETE CASCADE,
    position      smallint    NOT NULL,
    input         text        NOT NULL,
    domain        text        NOT NULL,
    status        text        NOT NULL DEFAULT 'PENDING'
                              CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED')),
    is_cpg        boolean,
    confidence    smallint    CHECK (confidence BETWEEN 1 AND 5),
    reasoning     text,
    source        text        CHECK (source IN ('known', 'cache', 'llm')),
    error         text,
    classified_at timestamptz,
    PRIMARY KEY (job_id, position),
    UNIQUE (job_id, domain)
);

-- The shared answer per (domain, classifier): the cache. FAILED rows keep the
-- reason for operators and never count as cached; they never replace a
-- COMPLETED answer.
CREATE TABLE result (
    domain         text        NOT NULL,
    classifier     text        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('COMPLETED', 'FAILED')),
    is_cpg         boolean,
    confidence     smallint    CHECK (confidence BETWEEN 1 AND 5),
    reasoning      text,
    error          text,
    model          text        NOT NULL DEFAULT '',
    prompt_version text        NOT NULL DEFAULT '',
    evidence       text[]      NOT NULL DEFAULT '{}',
    classified_at  timestamptz NOT NULL,
    PRIMARY KEY (domain, classifier)
);

-- Who is asking the model about a domain right now, so that concurrent jobs
-- (in any process) pay for one call. A lease: a crashed owner's claim runs out.
CREATE TABLE domain_claim (
    classifier text        NOT NULL,
    domain     text        NOT NULL,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (classifier, domain)
);

-- Companies known to be in a classifier's "yes" set (known CPG companies).
CREATE TABLE known_company (
    classifier text        NOT NULL,
    domain     text        NOT NULL,
    name       text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (classifier, domain)
);

-- Idempotency-Key per caller: the fingerprint of the first request and the
-- 202 it got, replayed for 24 hours.
CREATE TABLE idempotency_key (
    caller      text        NOT NULL,
    key         text        NOT NULL,
    fingerprint bytea       NOT NULL,
    job_id      uuid        NOT NULL REFERENCES classify_job (id) ON DELETE CASCADE,
    response    bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_key_created_at_idx ON idempotency_key (created_at);

-- +goose Down
DROP TABLE idempotency_key;
DROP TABLE known_company;
DROP TABLE domain_claim;
DROP TABLE result;
DROP TABLE classify_job_domain;
DROP TABLE classify_job;
