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

// ForBatch is For for the requests of caller's economy lists, staged for
// a provider batch: each counted at the Batch API's price, and settled by
// the batch (BatchWorker) once it is answered.
func (s *Spenders) ForBatch(caller string) classifier.Spender {
	if s == nil {
		return nil
	}
	return callerSpender{s: s, caller: caller, batch: true}
}

type callerSpender struct {
	s      *Spenders
	caller string
	batch  bool
}

// Reserve implements classifier.Spender.
func (c callerSpender) Reserve(ctx context.Context, model string) (classifier.Spend, error) {
	s := c.s
	now := time.Now()
	s.mu.Lock()
	until, refused := s.spent[c.caller]
	usd := s.estimate(model)
	s.mu.Unlock()
	if c.batch {
		usd *= s.batchRatio(model)
	}
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

// batchRatio is the Batch API's price of a call of model over the standard
// price (1 when it is not priced).
func (s *Spenders) batchRatio(model string) float64 {
	if s.Price == nil {
		return 1
	}
	u := &classifier.Usage{PromptTokens: llm.DefaultPromptTokens, CompletionTokens: llm.DefaultCompletionTokens}
	standard := s.Price.Usage(model, u, false)
	if standard <= 0 {
		return 1
	}
	return s.Price.Usage(model, u, true) / standard
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

// reservation is what one staged request counted against its caller's
// budget: the day and the estimate, which its batch settles.
type reservation struct {
	day time.Time
	usd float64
}

// recordStaged wraps sp so that the reservation of a call staged for a
// batch (settled with no usage) is kept in *into; nil stays nil.
func recordStaged(sp classifier.Spender, into *reservation) classifier.Spender {
	if sp == nil {
		return nil
	}
	return recorder{Spender: sp, into: into}
}

type recorder struct {
	classifier.Spender
	into *reservation
}

func (r recorder) Reserve(ctx context.Context, model string) (classifier.Spend, error) {
	sp, err := r.Spender.Reserve(ctx, model)
	if err != nil {
		return nil, err
	}
	return recordedSpend{Spend: sp, into: r.into}, nil
}

type recordedSpend struct {
	classifier.Spend
	into *reservation
}

func (s recordedSpend) Settle(u *classifier.Usage, model string, called bool) {
	if cs, ok := s.Spend.(*callerSpend); ok && called && u == nil {
		*s.into = reservation{day: cs.day, usd: cs.usd}
	}
	s.Spend.Settle(u, model, called)
}
