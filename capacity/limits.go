package capacity

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// One limiter decides how many model calls start (issue 38): the
// deployment's capacity, which every worker process leases a share of
// (classifier/llm/lease.go). Its limits are the account's, each lowered by
// what the provider's x-ratelimit headers state; with none configured, the
// stated ones alone. A process's concurrency and rate are caps within it,
// off unless set. With no limit known at all, a process holds its
// concurrency, llm.DefaultMaxConcurrency when not set, calls in flight
// until the provider states its limits.

// Setting is one model limit as configured (0: not set) and the name it is
// set by: its environment variable's, which only cmd/domainclass knows.
type Setting struct {
	Value int
	Name  string
}

// Limits are a worker's model limits as configured: the provider account's
// (the deployment's, per minute and in flight) and the process's own caps.
type Limits struct {
	AccountRPM, AccountTPM, AccountConcurrency Setting
	ProcessConcurrency, ProcessRatePerMinute   Setting
}

// InFlight is a process's calls in flight while no limit of the account is
// known.
func (l Limits) InFlight() int {
	return cmp.Or(l.ProcessConcurrency.Value, llm.DefaultMaxConcurrency)
}

// ProcessBounds are the bounds of one worker process, as a list's estimate
// takes them: its caps, else the account's, else the calls in flight of a
// process while no limit is known; a rate of 0 is none.
func (l Limits) ProcessBounds() (concurrency, ratePerMinute int) {
	return cmp.Or(l.ProcessConcurrency.Value, l.AccountConcurrency.Value, llm.DefaultMaxConcurrency),
		cmp.Or(l.ProcessRatePerMinute.Value, l.AccountRPM.Value)
}

// Unknown is what a worker says, at start-up and in its readiness, while
// no limit of the account is known.
func (l Limits) Unknown() string {
	return fmt.Sprintf("no limit of the model provider's account is known: %s, %s and %s are not set and the provider "+
		"has stated none (x-ratelimit headers); each worker process holds at most %d model calls in flight until it "+
		"does (%s); set them to the account's limits", l.AccountRPM.Name, l.AccountTPM.Name, l.AccountConcurrency.Name,
		l.InFlight(), l.ProcessConcurrency.Name)
}

// from is the lower of the configured limit and a stated one, and where it
// came from; 0, "none" with neither.
func (s Setting) from(stated int) (int, string) {
	switch {
	case s.Value > 0 && (stated == 0 || s.Value <= stated):
		return s.Value, s.Name
	case stated > 0:
		return stated, "provider headers"
	}
	return 0, "none"
}

// Log says once, at a worker's start, the limits in effect on its model
// calls and where each came from (issue 36: nothing said that
// LLM_RATE_PER_MINUTE's default held 32 slots to 5 calls a second): the
// deployment's, which every worker process leases a share of, configured
// or the provider's stated limits (as last recorded in store), and the
// process's own caps; and warns when no limit of the account is known.
func (l Limits) Log(ctx context.Context, logger *slog.Logger, store AccountStore) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	statedRPM, statedTPM, err := db.LLMAccountStatedGet(ctx, store.DB, store.ID)
	if err != nil {
		logger.Warn("cannot read the limits the model provider stated; they apply once it states them again", "error", err)
	}
	rpm, rpmFrom := l.AccountRPM.from(statedRPM)
	tpm, tpmFrom := l.AccountTPM.from(statedTPM)
	conc, concFrom := l.AccountConcurrency.from(0)
	known := rpm > 0 || tpm > 0 || conc > 0
	own, ownFrom := l.ProcessConcurrency.Value, l.ProcessConcurrency.Name
	switch {
	case own == 0 && !known:
		own, ownFrom = llm.DefaultMaxConcurrency, "default while no limit of the account is known"
	case own == 0:
		ownFrom = "not set"
	}
	rate, rateFrom := l.ProcessRatePerMinute.from(0)
	if rateFrom == "none" {
		rateFrom = "not set"
	}
	logger.Info("model limits", "account", store.Name, "decided_by", "the deployment's lease, shared by the worker processes",
		"rpm", rpm, "rpm_from", rpmFrom, "tpm", tpm, "tpm_from", tpmFrom, "concurrency", conc, "concurrency_from", concFrom,
		"process_concurrency", own, "process_concurrency_from", ownFrom,
		"process_rate_per_minute", rate, "process_rate_from", rateFrom)
	if !known {
		logger.Warn(l.Unknown())
	}
}
