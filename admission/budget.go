package admission

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// OverBudgetError: the list's estimate (ModelCalls, and CostUSD when
// Priced) is more than its caller's daily Budget has left after Used; the
// budget refills at Resets.
type OverBudgetError struct {
	ModelCalls int
	CostUSD    float64
	Priced     bool
	Budget     db.CallerBudget
	Used       db.CallerUsage
	Resets     time.Time
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("an estimated %d model calls, over what the daily budget has left", e.ModelCalls)
}

// ExceedsBudgetError: the list's estimate (ModelCalls, and CostUSD when
// Priced) is more than its caller's whole daily Budget: waiting for the
// budget to refill never makes it fit.
type ExceedsBudgetError struct {
	ModelCalls int
	CostUSD    float64
	Priced     bool
	Budget     db.CallerBudget
}

func (e *ExceedsBudgetError) Error() string {
	return fmt.Sprintf("an estimated %d model calls, over the whole daily budget", e.ModelCalls)
}

// estimate is the dry run's (DryRun): how many of r.Domains are
// overridden, cached and fresh, what the fresh ones cost with the price
// table, and how long the list takes (Estimator.estimate).
func estimate(ctx context.Context, exec db.DBTX, r Request) (Admission, error) {
	l, e := r.List, r.Estimator
	var est wire.ListEstimate
	var err error
	est.Override, est.Cache, err = db.DomainsAnswered(ctx, exec, l.Classifier, r.Domains, e.Freshness, l.Want, time.Now())
	if err != nil {
		return Admission{}, err
	}
	est.Rows, est.Domains, est.Duplicates, est.Rejected = l.Rows, l.Domains, l.Duplicates, l.Rejected
	est.Model = e.Model
	stats, err := db.ModelStatsRecent(ctx, exec, l.Classifier, modelStatsSample)
	if err != nil {
		return Admission{}, err
	}
	est.LLM = est.Domains - est.Override - est.Cache
	est.ModelCalls = est.LLM
	// The deprecated names, kept one release.
	est.Overridden, est.Known, est.Cached, est.Fresh = est.Override, est.Override, est.Cache, est.LLM
	load, err := db.LoadRecent(ctx, exec, throughputWindow, throughputStep, rowsWindow, rowsMinMeasured)
	if err != nil {
		return Admission{}, err
	}
	var standard, economy wire.TierEstimate
	standard, economy, est.Basis = e.estimate(est, stats, load)
	est.Tier, est.Tiers = l.Tier, map[string]wire.TierEstimate{classifier.TierStandard: standard, classifier.TierEconomy: economy}
	est.EstimatedSeconds, est.EstimatedCostUSD = est.Tiers[l.Tier].EstimatedSeconds, est.Tiers[l.Tier].EstimatedCostUSD
	a := Admission{Counted: true, Priced: est.EstimatedCostUSD != nil, ModelCalls: est.ModelCalls, Estimate: est}
	if c := est.EstimatedCostUSD; c != nil {
		a.CostUSD = *c
	}
	return a, nil
}

// budget refuses list r.List, its rows written in exec, when its
// estimated model calls or their price are more than its caller has left
// today, unless r.RunPartly: then the list runs until the budget is
// spent, and its rows left end FAILED. A caller without a budget is not
// asked about, and its list's calls are not counted.
func budget(ctx context.Context, exec db.DBTX, r Request) (Admission, error) {
	l := r.List
	b, u, reset, err := db.CallerToday(ctx, exec, l.Caller)
	if err != nil || !b.Limited() || r.RunPartly {
		return Admission{}, err
	}
	calls, err := db.ListModelCalls(ctx, exec, l.ID, l.Classifier, r.Estimator.Freshness, l.Want, time.Now())
	if err != nil || calls == 0 {
		return Admission{Counted: true}, err
	}
	perCall, priced, err := perCallUSD(ctx, exec, r.Estimator, l.Classifier, l.Tier)
	if err != nil {
		return Admission{}, err
	}
	cost := RoundUSD(perCall * float64(calls))
	a := Admission{Counted: true, Priced: priced, ModelCalls: calls, CostUSD: cost}
	if (b.ModelCallsPerDay > 0 && calls > b.ModelCallsPerDay) || (b.SpendPerDayUSD > 0 && priced && cost > b.SpendPerDayUSD) {
		return a, &ExceedsBudgetError{ModelCalls: calls, CostUSD: cost, Priced: priced, Budget: b}
	}
	over := b.ModelCallsPerDay > 0 && calls > max(0, b.ModelCallsPerDay-u.ModelCalls)
	over = over || (b.SpendPerDayUSD > 0 && priced && cost > math.Max(0, b.SpendPerDayUSD-u.SpendUSD))
	if over {
		return a, &OverBudgetError{ModelCalls: calls, CostUSD: cost, Priced: priced, Budget: b, Used: u, Resets: reset}
	}
	return a, nil
}

// perCallUSD is what one model call of classifierName costs in tier, as
// the dry run prices it (Estimator.perCallUSD). priced is false for a
// model the table does not list.
func perCallUSD(ctx context.Context, exec db.DBTX, e Estimator, classifierName, tier string) (usd float64, priced bool, err error) {
	if e.Price == nil {
		return 0, false, nil
	}
	stats, err := db.ModelStatsRecent(ctx, exec, classifierName, modelStatsSample)
	if err != nil {
		return 0, false, err
	}
	usd, priced = e.perCallUSD(stats, tier)
	return usd, priced, nil
}
