package main

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// One limiter decides how many model calls start (issue 38): the
// deployment's capacity, which every worker process leases a share of
// (classifier/llm/lease.go). Its limits are the account's, LLM_ACCOUNT_*,
// each lowered by what the provider's x-ratelimit headers state; with none
// configured, the stated ones alone. A process's LLM_MAX_CONCURRENCY and
// LLM_RATE_PER_MINUTE are caps within it, off unless set. With no limit
// known at all, a process holds LLM_MAX_CONCURRENCY, llm.DefaultMaxConcurrency
// when not set, calls in flight until the provider states its limits.

// modelLimitsUnknown is what a worker says, at start-up and in its
// readiness, while no limit of the account is known.
func (c Config) modelLimitsUnknown() string {
	return fmt.Sprintf("no limit of the model provider's account is known: LLM_ACCOUNT_RPM, LLM_ACCOUNT_TPM and "+
		"LLM_ACCOUNT_CONCURRENCY are not set and the provider has stated none (x-ratelimit headers); each worker "+
		"process holds at most %d model calls in flight until it does (LLM_MAX_CONCURRENCY); set LLM_ACCOUNT_* to "+
		"the account's limits", c.processConcurrency())
}

// processConcurrency is a process's calls in flight while no limit of the
// account is known.
func (c Config) processConcurrency() int {
	return cmp.Or(c.LLMMaxConcurrency, llm.DefaultMaxConcurrency)
}

// modelConns is how many idle connections to the model's (and search's)
// provider a process keeps: its calls in flight when it caps them, else
// enough for a rate-bound process's (64: 40 a second of 1.5 s calls).
func (c Config) modelConns() int { return cmp.Or(c.LLMMaxConcurrency, 64) }

// limitFrom is the lower of a configured limit (named name) and a stated
// one, and where it came from; 0, "none" with neither.
func limitFrom(configured int, name string, stated int) (int, string) {
	switch {
	case configured > 0 && (stated == 0 || configured <= stated):
		return configured, name
	case stated > 0:
		return stated, "provider headers"
	}
	return 0, "none"
}

// logModelLimits says once, at a worker's start, the limits in effect on
// its model calls and where each came from (issue 36: nothing said that
// LLM_RATE_PER_MINUTE's default held 32 slots to 5 calls a second): the
// deployment's, which every worker process leases a share of, from
// LLM_ACCOUNT_* or the provider's stated limits (as last recorded), and the
// process's own caps; and warns when no limit of the account is known.
func (m *Main) logModelLimits(ctx context.Context, account, host string) {
	cfg := m.Config
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	statedRPM, statedTPM, err := db.LLMAccountStatedGet(ctx, m.WorkerDB.Pool, account)
	if err != nil {
		m.Logger.Warn("cannot read the limits the model provider stated; they apply once it states them again", "error", err)
	}
	rpm, rpmFrom := limitFrom(cfg.LLMAccountRPM, "LLM_ACCOUNT_RPM", statedRPM)
	tpm, tpmFrom := limitFrom(cfg.LLMAccountTPM, "LLM_ACCOUNT_TPM", statedTPM)
	conc, concFrom := limitFrom(cfg.LLMAccountConcurrency, "LLM_ACCOUNT_CONCURRENCY", 0)
	known := rpm > 0 || tpm > 0 || conc > 0
	own, ownFrom := cfg.LLMMaxConcurrency, "LLM_MAX_CONCURRENCY"
	switch {
	case own == 0 && !known:
		own, ownFrom = llm.DefaultMaxConcurrency, "default while no limit of the account is known"
	case own == 0:
		ownFrom = "not set"
	}
	rate, rateFrom := limitFrom(cfg.LLMRatePerMinute, "LLM_RATE_PER_MINUTE", 0)
	if rateFrom == "none" {
		rateFrom = "not set"
	}
	m.Logger.Info("model limits", "account", host, "decided_by", "the deployment's lease, shared by the worker processes",
		"rpm", rpm, "rpm_from", rpmFrom, "tpm", tpm, "tpm_from", tpmFrom, "concurrency", conc, "concurrency_from", concFrom,
		"process_concurrency", own, "process_concurrency_from", ownFrom,
		"process_rate_per_minute", rate, "process_rate_from", rateFrom)
	if !known {
		m.Logger.Warn(cfg.modelLimitsUnknown())
	}
}

// readyDetail is what a worker's readiness says beside "ok": that no limit
// of the model account is known, while none is ("" otherwise).
func (m *Main) readyDetail() string {
	if m.capacity == nil || m.capacity.LimitKnown() {
		return ""
	}
	return m.Config.modelLimitsUnknown()
}
