-- +goose Up

-- Shared budgets (issue 24): what every worker process of a deployment
-- shares, held here because Postgres is what they all share already.

-- A provider account: the base URL and key the workers call the model
-- with, named by a hash of both (never the key itself) and the URL's host.
-- Its limits come from each process's settings (LLM_ACCOUNT_*); what lives
-- here is what the provider said, for every process to hear: a time before
-- which no call starts (a 429's wait), a factor that lowered the budget on
-- a 429 and recovers with time, and the limits the provider's
-- x-ratelimit-limit-* headers stated.
CREATE TABLE llm_account (
    id             text        PRIMARY KEY,
    name           text        NOT NULL,
    cooldown_until timestamptz NOT NULL DEFAULT 'epoch',
    factor         float8      NOT NULL DEFAULT 1 CHECK (factor > 0 AND factor <= 1),
    factor_at      timestamptz NOT NULL DEFAULT now(),
    stated_rpm     integer     CHECK (stated_rpm > 0),
    stated_tpm     integer     CHECK (stated_tpm > 0)
);

-- Each worker process's lease on its account's budget: the share of the
-- requests and tokens per minute it may use (a fraction), the calls it may
-- have in flight, and what it asked for (its waiting and running calls by
-- class and caller), until expires_at. A process renews its lease every
-- fraction of a second; one killed with SIGKILL stops renewing, and its
-- share goes back to the others once the lease expires, seconds later.
CREATE TABLE llm_lease (
    account    text        NOT NULL REFERENCES llm_account (id) ON DELETE CASCADE,
    holder     text        NOT NULL,
    share      float8      NOT NULL CHECK (share >= 0 AND share <= 1),
    slots      integer     NOT NULL CHECK (slots >= 0),
    demand     jsonb       NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (account, holder)
);

-- A caller's daily model budget, set with `domainclass apikey limits`:
-- model calls and/or spend in US dollars a day (UTC), NULL for no limit.
-- Apart from api_key, so that the worker reads budgets and never key
-- hashes.
CREATE TABLE caller_budget (
    caller              text    PRIMARY KEY,
    model_calls_per_day integer CHECK (model_calls_per_day > 0),
    spend_per_day_usd   numeric(14, 6) CHECK (spend_per_day_usd > 0)
);

-- What each caller's work asked of the model, a row per caller and UTC
-- day: a call is counted (at its estimated price) before it starts, so a
-- caller at its budget starts none, and corrected from the response's usage
-- once it ends (or taken back when no call was answered).
CREATE TABLE caller_spend (
    caller      text   NOT NULL,
    day         date   NOT NULL,
    model_calls bigint NOT NULL DEFAULT 0,
    spend_usd   float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (caller, day)
);

-- +goose Down
DROP TABLE caller_spend;
DROP TABLE caller_budget;
DROP TABLE llm_lease;
DROP TABLE llm_account;
