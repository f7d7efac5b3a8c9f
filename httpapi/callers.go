package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/admission"
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
func roundUSD(usd float64) float64 { return admission.RoundUSD(usd) }

// overBudgetParam reads ?over_budget: what to do with a list whose
// estimate is over the caller's remaining daily budget, refuse it (the
// default) or run_partly (accept it, to run up to the budget). The
// deprecated ?budget=whole|partial, its name before issue 38, is read one
// release more; deprecated is true when it was sent. The two disagreeing
// is a 400.
func overBudgetParam(q map[string][]string) (runPartly, deprecated bool, err error) {
	invalid := func(name, values, v string) error {
		return &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be %s, not %q.", name, values, classifier.Truncate(v, 40))}
	}
	v, given := firstOf(q["over_budget"]), len(q["over_budget"]) > 0
	switch v {
	case "", overBudgetRefuse:
	case overBudgetRunPartly:
		runPartly = true
	default:
		return false, false, invalid("over_budget", overBudgetRefuse+" or "+overBudgetRunPartly, v)
	}
	if len(q["budget"]) == 0 {
		return runPartly, false, nil
	}
	old := false
	switch v := firstOf(q["budget"]); v {
	case "", "whole":
	case "partial":
		old = true
	default:
		return false, false, invalid("budget (deprecated: send over_budget)", "whole or partial", v)
	}
	if given && old != runPartly {
		return false, false, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: "over_budget and the deprecated budget disagree; send over_budget alone."}
	}
	return old, true, nil
}

// The values of ?over_budget.
const (
	overBudgetRefuse    = "refuse"
	overBudgetRunPartly = "run_partly"
)
