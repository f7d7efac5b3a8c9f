-- +goose Up

-- Issue 36: a job that needs a domain an economy batch holds must not wait
-- for the batch (up to a day). A claim now says whether it is a batch's
-- (held for the provider's whole window) and since when it is held, so
-- that a job takes a batch's claim over once it has been held CLAIM_WAIT,
-- and never waits for it holding a worker.
ALTER TABLE domain_claim
    ADD COLUMN batch boolean NOT NULL DEFAULT false,
    ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now();

-- What staging a request counted against its caller's budget (the day and
-- the estimate), so that the batch settles it: given back when no call was
-- made (a cancelled or refused batch, a domain answered meanwhile),
-- corrected to the answer's real price when one was.
ALTER TABLE llm_batch_item
    ADD COLUMN spend_day date,
    ADD COLUMN spend_usd float8 NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE llm_batch_item DROP COLUMN spend_usd, DROP COLUMN spend_day;
ALTER TABLE domain_claim DROP COLUMN claimed_at, DROP COLUMN batch;
