package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// SpentReason is the error of a domain that needed the model after its
// caller's daily budget was spent.
const SpentReason = "the caller's daily model budget is spent (it refills at 00:00 UTC)"

// The reviewed settings of the callers' budgets.
const (
	// spentRecheck: once a caller's budget refused a call, its next calls
	// in this process are refused without asking Postgres for 5 s, so that
	// the rest of a big list fails fast; an operator who raises the budget
	// sees it apply within that.
	spentRecheck = 5 * time.Second
)

// Spenders count the callers' model calls against their daily budgets in
// Postgres (caller_budget, caller_spend): a call is counted, at the mean
// price of the last calls, before its search and model call start, and
// corrected from its usage once it ends. One per worker process; a nil
// *Spenders counts nothing.
type Spenders struct {
	DB     db.DBTX
	Price  llm.Pricer // nil: calls are counted at $0
	Logger *slog.Logger

	mu    sync.Mutex
	spent map[string]time.Time // callers refused lately, until when not to ask
	mean  float64              // what a call cost lately
}

// For returns the spender of caller's work (nil when s is).
func (s *Spenders) For(caller string) classifier.Spender {
	if s == nil {
		return nil
	}
	return callerSpender{s: s, caller: caller}
}

type callerSpender struct {
	s      *Spenders
	caller string
}

// Reserve implements classifier.Spender.
func (c callerSpender) Reserve(ctx context.Context, model string) (classifier.Spend, error) {
	s := c.s
	now := time.Now()
	s.mu.Lock()
	until, refused := s.spent[c.caller]
	usd := s.estimate(model)
	s.mu.Unlock()
	if refused && now.Before(until) {
		return nil, &classifier.BudgetSpentError{Reason: SpentReason}
	}
	day, ok, err := db.CallerSpendReserve(ctx, s.DB, c.caller, usd)
	if err != nil {
		return nil, err
	}
	if !ok {
		s.mu.Lock()
		if s.spent == nil {
			s.spent = map[string]time.Time{}
		}
		s.spent[c.caller] = now.Add(spentRecheck)
		s.mu.Unlock()
		return nil, &classifier.BudgetSpentError{Reason: SpentReason}
	}
	return &callerSpend{c: c, day: day, usd: usd}, nil
}

// estimate is what a call of model is counted at before it starts. s.mu
// is held.
func (s *Spenders) estimate(model string) float64 {
	if s.mean > 0 || s.Price == nil {
		return s.mean
	}
	// Before any call was answered: a call's default tokens, as the dry
	// run prices them.
	return s.Price.Usage(model, &classifier.Usage{PromptTokens: llm.DefaultPromptTokens, CompletionTokens: llm.DefaultCompletionTokens}, false)
}

type callerSpend struct {
	c   callerSpender
	day time.Time
	usd float64
}

// Settle implements classifier.Spend.
func (sp *callerSpend) Settle(u *classifier.Usage, model string, called bool) {
	s := sp.c.s
	calls, usd := 0, 0.0
	switch {
	case !called:
		calls, usd = -1, -sp.usd
	case u != nil && s.Price != nil:
		actual := s.Price.Usage(model, u, false)
		usd = actual - sp.usd
		s.mu.Lock()
		s.mean = ewmaCost(s.mean, actual)
		s.mu.Unlock()
	}
	if calls == 0 && usd == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.CallerSpendAdd(ctx, s.DB, sp.c.caller, sp.day, calls, usd); err != nil && s.Logger != nil {
		s.Logger.Warn("error correcting a caller's model spend", "caller", sp.c.caller, "error", err)
	}
}

// ewmaCost moves the mean a tenth of the way to x: a few calls correct the
// start, one odd call does not swing it.
func ewmaCost(mean, x float64) float64 {
	if mean == 0 {
		return x
	}
	return mean + 0.1*(x-mean)
}
