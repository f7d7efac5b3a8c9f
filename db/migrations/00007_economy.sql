-- +goose Up

-- The economy tier (issue 13): a list whose fresh domains go to the
-- provider's Batch API. Its cost so far is kept with it, as its counters are.
ALTER TABLE list ADD COLUMN tier text NOT NULL DEFAULT 'standard' CHECK (tier IN ('standard', 'economy')),
    ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;

-- An answer that came by batch names the provider's batch.
ALTER TABLE result ADD COLUMN batch_id text;

-- One provider batch per chunk of an economy list. Its requests are staged
-- here as the chunk prepares them (search, prompt), so that a chunk cut
-- short by its run budget or a crash goes on where it stopped; the batch
-- job then submits them (status 'ready'), follows the provider's batch
-- ('submitted') and stores its answers ('ended').
CREATE TABLE llm_batch (
    id                uuid        PRIMARY KEY,
    list_id           uuid        NOT NULL REFERENCES list (id) ON DELETE CASCADE,
    chunk             integer     NOT NULL,
    status            text        NOT NULL DEFAULT 'staging'
                                  CHECK (status IN ('staging', 'ready', 'submitted', 'ended')),
    provider_batch_id text,
    provider_status   text,
    attempts          integer     NOT NULL DEFAULT 0, -- provider batches created for it
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    submitted_at      timestamptz,
    ended_at          timestamptz,
    UNIQUE (list_id, chunk)
);

-- A staged request: the list row whose domain it asks about (the first row
-- of that domain in the list) and the chat completion body, as sent.
CREATE TABLE llm_batch_item (
    batch_id uuid    NOT NULL REFERENCES llm_batch (id) ON DELETE CASCADE,
    row      integer NOT NULL,
    domain   text    NOT NULL,
    body     jsonb   NOT NULL,
    prompt_version text NOT NULL,
    evidence text[]  NOT NULL DEFAULT '{}',
    PRIMARY KEY (batch_id, row)
);

-- +goose Down
DROP TABLE llm_batch_item;
DROP TABLE llm_batch;
ALTER TABLE result DROP COLUMN batch_id;
ALTER TABLE list DROP COLUMN tier, DROP COLUMN cost_usd;
