// Package spend counts the callers' model calls and dollars against their
// daily budgets in Postgres (caller_budget, caller_spend) before each call
// starts, and exports the day's top spenders as metrics (Collector). The
// workers of jobs hold one Spenders per process.
package spend

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
// corrected from its usage once it ends: two statements a call (For), or
// a few for a set of calls (Set). One per worker process; a nil *Spenders
// counts nothing.
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
// the batch (jobs.BatchWorker) once it is answered.
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
	s.mu.Lock()
	usd := s.estimate(model)
	s.mu.Unlock()
	if c.batch {
		usd *= s.batchRatio(model)
	}
	day, err := s.reserveOne(ctx, c.caller, usd)
	if err != nil {
		return nil, err
	}
	return &callerSpend{c: c, day: day, usd: usd}, nil
}

// reserveOne counts one call of caller at usd, or refuses it with a
// BudgetSpentError: without asking Postgres while the caller is in the
// spent memo.
func (s *Spenders) reserveOne(ctx context.Context, caller string, usd float64) (time.Time, error) {
	if s.refusedLately(caller) {
		return time.Time{}, &classifier.BudgetSpentError{Reason: SpentReason}
	}
	day, ok, err := db.CallerSpendReserve(ctx, s.DB, caller, usd)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		s.refused(caller)
		return time.Time{}, &classifier.BudgetSpentError{Reason: SpentReason}
	}
	return day, nil
}

// refusedLately reports whether caller's budget refused a call less than
// spentRecheck ago.
func (s *Spenders) refusedLately(caller string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, refused := s.spent[caller]
	return refused && time.Now().Before(until)
}

// refused notes that caller's budget has no room left now.
func (s *Spenders) refused(caller string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spent == nil {
		s.spent = map[string]time.Time{}
	}
	s.spent[caller] = time.Now().Add(spentRecheck)
}

// estimate is what a standard call of model is counted at before it
// starts: the mean of the last calls' costs, or, before any was answered,
// the price of a call's default tokens, as the dry run prices it. s.mu is
// held.
func (s *Spenders) estimate(model string) float64 {
	if s.mean > 0 {
		return s.mean
	}
	usd, _ := s.Price.CallCost(model, llm.DefaultTokens, classifier.TierStandard)
	return usd
}

// batchRatio is the Batch API's price of a call of model over the standard
// price (1 when it is not priced).
func (s *Spenders) batchRatio(model string) float64 {
	standard, _ := s.Price.CallCost(model, llm.DefaultTokens, classifier.TierStandard)
	if standard <= 0 {
		return 1
	}
	economy, _ := s.Price.CallCost(model, llm.DefaultTokens, classifier.TierEconomy)
	return economy / standard
}

type callerSpend struct {
	c   callerSpender
	day time.Time
	usd float64
}

// Settle implements classifier.Spend.
func (sp *callerSpend) Settle(u *classifier.Usage, model string, called bool) {
	s := sp.c.s
	calls, usd := s.correction(u, model, called, sp.usd)
	s.add(sp.c.caller, sp.day, calls, usd)
}

// correction is what a call counted at estimate is corrected by once it
// ended: taken back when no call was answered, else priced from its usage
// (which moves the mean); none for a staged call (no usage).
func (s *Spenders) correction(u *classifier.Usage, model string, called bool, estimate float64) (calls int, usd float64) {
	switch {
	case !called:
		return -1, -estimate
	case u != nil && s.Price != nil:
		actual := s.Price.Usage(model, u, false)
		s.mu.Lock()
		s.mean = ewmaCost(s.mean, actual)
		s.mu.Unlock()
		return 0, actual - estimate
	}
	return 0, 0
}

// add writes a correction of caller's count of day on its own: logged,
// not returned, as a Settle cannot fail.
func (s *Spenders) add(caller string, day time.Time, calls int, usd float64) {
	if calls == 0 && usd == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.CallerSpendAdd(ctx, s.DB, caller, day, calls, usd); err != nil && s.Logger != nil {
		s.Logger.Warn("error correcting a caller's model spend", "caller", caller, "error", err)
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

// Reservation is what one staged request counted against its caller's
// budget: the day and the estimate, which its batch settles.
type Reservation struct {
	Day time.Time
	USD float64
}

// RecordStaged wraps sp so that the Reservation of a call staged for a
// batch (settled with no usage) is kept in *into; nil stays nil.
func RecordStaged(sp classifier.Spender, into *Reservation) classifier.Spender {
	if sp == nil {
		return nil
	}
	return recorder{Spender: sp, into: into}
}

type recorder struct {
	classifier.Spender
	into *Reservation
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
	into *Reservation
}

func (s recordedSpend) Settle(u *classifier.Usage, model string, called bool) {
	if cs, ok := s.Spend.(*callerSpend); ok && called && u == nil {
		*s.into = Reservation{Day: cs.day, USD: cs.usd}
	}
	s.Spend.Settle(u, model, called)
}
