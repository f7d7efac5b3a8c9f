package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// callerMe handles GET /callers/me: the caller's limits, its daily model
// budget and what its work used of it today.
func (s *Server) callerMe(c *gin.Context) {
	caller := callerOf(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	b, u, reset, err := db.CallerToday(ctx, s.cfg.DB.Pool, caller.Name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	r := wire.CallerReport{Caller: caller.Name, Day: u.Day.Format(time.DateOnly), ResetsAt: reset.UTC(),
		Usage: wire.ModelUsage{ModelCalls: u.ModelCalls, CostUSD: roundUSD(u.SpendUSD), SpendUSD: roundUSD(u.SpendUSD)},
		Limits: wire.CallerLimits{RatePerMinute: caller.RatePerMinute, MaxQueuedDomains: caller.MaxQueuedDomains,
			MaxActiveLists: caller.MaxActiveLists, MaxStoredRows: caller.MaxStoredRows, MaxUploads: caller.MaxUploads,
			MaxDownloads: caller.MaxDownloads}}
	if b.ModelCallsPerDay > 0 {
		left := max(0, b.ModelCallsPerDay-u.ModelCalls)
		r.Budget.ModelCalls, r.Remaining.ModelCalls = &b.ModelCallsPerDay, &left
	}
	if b.SpendPerDayUSD > 0 {
		left := roundUSD(math.Max(0, b.SpendPerDayUSD-u.SpendUSD))
		r.Budget.CostUSD, r.Remaining.CostUSD = &b.SpendPerDayUSD, &left
		r.Budget.SpendUSD, r.Remaining.SpendUSD = r.Budget.CostUSD, r.Remaining.CostUSD // their deprecated names
	}
	c.JSON(http.StatusOK, r)
}

// roundUSD rounds to the micro-dollar, as the dry run does.
func roundUSD(usd float64) float64 { return math.Round(usd*1e6) / 1e6 }

// budgetParam reads ?budget=partial: accept a list whose estimate is over
// the caller's budget, to run up to it.
func budgetParam(q map[string][]string) (partial bool, err error) {
	switch v := firstOf(q["budget"]); v {
	case "", "whole":
		return false, nil
	case "partial":
		return true, nil
	default:
		return false, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("budget must be whole or partial, not %q.", classifier.Truncate(v, 40))}
	}
}

// listBudget refuses list l, uploaded in tx, when its estimated model calls
// or their price are more than its caller has left today, unless partial:
// then the list runs until the budget is spent, and its rows left end
// FAILED. A caller without a budget is not asked about.
func (s *Server) listBudget(ctx context.Context, tx db.DBTX, l *classifier.List, partial bool) error {
	b, u, reset, err := db.CallerToday(ctx, tx, l.Caller)
	if err != nil || !b.Limited() || partial {
		return err
	}
	calls, err := db.ListModelCalls(ctx, tx, l.ID, l.Classifier, s.cfg.Estimate.Freshness, l.Want, time.Now())
	if err != nil || calls == 0 {
		return err
	}
	perCall, priced, err := s.perCallUSD(ctx, tx, l.Classifier, l.Tier)
	if err != nil {
		return err
	}
	cost := roundUSD(perCall * float64(calls))
	if err := listFitsBudget(b, calls, cost, priced); err != nil {
		return err
	}
	var left []string
	over := false
	if b.ModelCallsPerDay > 0 {
		n := max(0, b.ModelCallsPerDay-u.ModelCalls)
		over = over || calls > n
		left = append(left, fmt.Sprintf("%d model calls", n))
	}
	if b.SpendPerDayUSD > 0 {
		usd := math.Max(0, b.SpendPerDayUSD-u.SpendUSD)
		over = over || (priced && cost > usd)
		left = append(left, "$"+strconv.FormatFloat(roundUSD(usd), 'f', -1, 64))
	}
	if !over {
		return nil
	}
	need := fmt.Sprintf("%d model calls", calls)
	if priced {
		need += fmt.Sprintf(" ($%s)", strconv.FormatFloat(cost, 'f', -1, 64))
	}
	return &problem{status: http.StatusTooManyRequests, slug: "budget-exceeded", retryAfter: time.Until(reset),
		detail: fmt.Sprintf("This list needs an estimated %s; your daily model budget has %s left, and refills at %s. "+
			"Send it with ?budget=partial to run it up to the budget (its rows left end FAILED; POST /lists/{id}/retry "+
			"resumes them once the budget refills), or send a smaller list.",
			need, joinAnd(left), reset.UTC().Format(time.RFC3339))}
}

// listFitsBudget refuses a list whose estimate (calls, and cost when
// priced) is more than budget b allows in a whole day: 422, without
// Retry-After, since waiting for the budget to refill never makes it fit.
func listFitsBudget(b db.CallerBudget, calls int, cost float64, priced bool) error {
	var over, whole []string
	if b.ModelCallsPerDay > 0 && calls > b.ModelCallsPerDay {
		over = append(over, fmt.Sprintf("%d model calls", calls))
		whole = append(whole, fmt.Sprintf("%d model calls", b.ModelCallsPerDay))
	}
	if b.SpendPerDayUSD > 0 && priced && cost > b.SpendPerDayUSD {
		over = append(over, "$"+strconv.FormatFloat(cost, 'f', -1, 64))
		whole = append(whole, "$"+strconv.FormatFloat(b.SpendPerDayUSD, 'f', -1, 64))
	}
	if len(over) == 0 {
		return nil
	}
	return &problem{status: http.StatusUnprocessableEntity, slug: "list-exceeds-budget",
		detail: fmt.Sprintf("This list needs an estimated %s; your daily model budget is %s in all, so it can never run whole in a day. "+
			"Send it with ?budget=partial to run it up to the budget (POST /lists/{id}/retry resumes its rows left once the budget refills), "+
			"split it, or ask an operator to raise your budget.", joinAnd(over), joinAnd(whole))}
}

// perCallUSD is what one model call of classifierName costs in tier, as
// the dry run prices it (Estimator.perCallUSD). priced is false for a
// model the table does not list.
func (s *Server) perCallUSD(ctx context.Context, tx db.DBTX, classifierName, tier string) (usd float64, priced bool, err error) {
	if s.cfg.Estimate.Price == nil {
		return 0, false, nil
	}
	stats, err := db.ModelStatsRecent(ctx, tx, classifierName, modelStatsSample)
	if err != nil {
		return 0, false, err
	}
	usd, priced = s.cfg.Estimate.perCallUSD(stats, tier)
	return usd, priced, nil
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return parts[0] + " and " + parts[1]
}
