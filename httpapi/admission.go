package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/domainclass/domainclass/admission"
	"github.com/domainclass/domainclass/classifier"
)

// Estimator is what a list's estimate (the dry run) and a caller's budget
// check are computed from: admission.Estimator, as the server's Config
// takes it.
type Estimator admission.Estimator

// DefaultCallSeconds is the estimate's time for one model call before any
// was measured (admission.DefaultCallSeconds).
const DefaultCallSeconds = admission.DefaultCallSeconds

// DefaultSearchSeconds is a search's share of a fresh domain's time
// (admission.DefaultSearchSeconds), for a deployment that searches.
const DefaultSearchSeconds = admission.DefaultSearchSeconds

func (e Estimator) withDefaults() Estimator {
	return Estimator(admission.Estimator(e).WithDefaults())
}

// admissionOf is the question admission.List is asked about caller's list
// l at stage: its limits, the estimator, and whether it may run partly.
func (s *Server) admissionOf(stage admission.Stage, caller Caller, l *classifier.List, runPartly bool) admission.Request {
	return admission.Request{Stage: stage, List: l, RunPartly: runPartly, Estimator: admission.Estimator(s.cfg.Estimate),
		Limits: admission.Limits{MaxActiveLists: caller.MaxActiveLists, MaxStoredRows: caller.MaxStoredRows,
			ListRetention: s.cfg.Queue.ListRetention}}
}

// admissionProblem words admission's refusals: err's problem, or false
// when err is none of them.
func admissionProblem(err error) (*problem, bool) {
	var (
		lists    *admission.TooManyListsError
		tooLarge *admission.ListTooLargeError
		full     *admission.StoredRowsFullError
		over     *admission.OverBudgetError
		exceeds  *admission.ExceedsBudgetError
	)
	switch {
	case errors.As(err, &lists):
		also := ""
		if lists.Uploading > 0 {
			also = fmt.Sprintf(" (and %d uploads in progress)", lists.Uploading)
		}
		return &problem{status: http.StatusTooManyRequests, slug: "too-many-lists", retryAfter: listRetryAfter,
			detail: fmt.Sprintf("You have %d lists not yet ended%s; the limit is %d. Wait for one to end, or cancel one.",
				lists.Active, also, lists.Max)}, true
	case errors.As(err, &tooLarge):
		return &problem{status: http.StatusRequestEntityTooLarge, slug: "list-too-large",
			detail: fmt.Sprintf("The list has %d rows; your key may keep at most %d list rows stored. Split the list.",
				tooLarge.Rows, tooLarge.Limit)}, true
	case errors.As(err, &full):
		return storedRowsProblem(full), true
	case errors.As(err, &over):
		return overBudgetProblem(over), true
	case errors.As(err, &exceeds):
		return exceedsBudgetProblem(exceeds), true
	}
	return nil, false
}

// listRetryAfter is the Retry-After of a refusal for too many active lists:
// lists run for minutes.
const listRetryAfter = time.Minute

// storedRowsProblem is the 429 of a list whose rows would take its
// caller's stored rows over the limit: how many are stored, and when the
// soonest of its lists expires.
func storedRowsProblem(e *admission.StoredRowsFullError) *problem {
	when, retryAfter := fmt.Sprintf("None of your lists has ended yet; a list's rows count until %s after it ends.",
		days(e.Retention)), listRetryAfter
	if next := e.NextExpiry; next != nil {
		when = fmt.Sprintf("Your soonest list to go is purged after %s (its rows stop counting within the hour after): "+
			"download the results you need before then.", next.UTC().Format(time.RFC3339))
		retryAfter = max(time.Until(*next), listRetryAfter)
	}
	return &problem{status: http.StatusTooManyRequests, slug: "too-many-stored-rows", retryAfter: retryAfter,
		detail: fmt.Sprintf("You have %d rows stored in lists; %d more would cross your limit of %d. %s",
			e.Stored, e.Rows, e.Limit, when)}
}

// overBudgetProblem is the 429 of a list over what its caller's daily
// budget has left, until the budget refills.
func overBudgetProblem(e *admission.OverBudgetError) *problem {
	b, u := e.Budget, e.Used
	var left []string
	if b.ModelCallsPerDay > 0 {
		left = append(left, fmt.Sprintf("%d model calls", max(0, b.ModelCallsPerDay-u.ModelCalls)))
	}
	if b.SpendPerDayUSD > 0 {
		left = append(left, "$"+strconv.FormatFloat(admission.RoundUSD(math.Max(0, b.SpendPerDayUSD-u.SpendUSD)), 'f', -1, 64))
	}
	need := fmt.Sprintf("%d model calls", e.ModelCalls)
	if e.Priced {
		need += fmt.Sprintf(" ($%s)", strconv.FormatFloat(e.CostUSD, 'f', -1, 64))
	}
	return &problem{status: http.StatusTooManyRequests, slug: "budget-exceeded", retryAfter: time.Until(e.Resets),
		detail: fmt.Sprintf("This list needs an estimated %s; your daily model budget has %s left, and refills at %s. "+
			"Send it with ?over_budget=run_partly to run it up to the budget (its rows left end FAILED; POST /lists/{id}/retry "+
			"resumes them once the budget refills), or send a smaller list.",
			need, joinAnd(left), e.Resets.UTC().Format(time.RFC3339))}
}

// exceedsBudgetProblem is the 422 of a list over its caller's whole daily
// budget, without Retry-After, since waiting for the budget to refill
// never makes it fit.
func exceedsBudgetProblem(e *admission.ExceedsBudgetError) *problem {
	b := e.Budget
	var over, whole []string
	if b.ModelCallsPerDay > 0 && e.ModelCalls > b.ModelCallsPerDay {
		over = append(over, fmt.Sprintf("%d model calls", e.ModelCalls))
		whole = append(whole, fmt.Sprintf("%d model calls", b.ModelCallsPerDay))
	}
	if b.SpendPerDayUSD > 0 && e.Priced && e.CostUSD > b.SpendPerDayUSD {
		over = append(over, "$"+strconv.FormatFloat(e.CostUSD, 'f', -1, 64))
		whole = append(whole, "$"+strconv.FormatFloat(b.SpendPerDayUSD, 'f', -1, 64))
	}
	return &problem{status: http.StatusUnprocessableEntity, slug: "list-exceeds-budget",
		detail: fmt.Sprintf("This list needs an estimated %s; your daily model budget is %s in all, so it can never run whole in a day. "+
			"Send it with ?over_budget=run_partly to run it up to the budget (POST /lists/{id}/retry resumes its rows left once the budget refills), "+
			"split it, or ask an operator to raise your budget.", joinAnd(over), joinAnd(whole))}
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
