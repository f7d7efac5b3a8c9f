package classifier

import (
	"context"
	"errors"
)

// A Spender counts a caller's model calls against its budget: the
// pipeline asks it before the search and model call of a domain that no
// override or cached answer answers (never for those), and settles once
// the call ended. The worker passes one per job or list (CallOptions.Spender).
type Spender interface {
	// Reserve counts one call of model before it starts. It returns an
	// error that BudgetSpent recognises when the caller's budget has no
	// room left, and other errors when it cannot tell (retry later).
	Reserve(ctx context.Context, model string) (Spend, error)
}

// A Spend is one reserved call. Settle is called once: with called false
// when no call was answered (the reservation is taken back), else with the
// call's usage (nil: the call was staged for a batch, and its estimate
// stands).
type Spend interface {
	Settle(u *Usage, model string, called bool)
}

// BudgetSpentError is a call refused because the caller's model budget
// for the day is spent. The domain ends FAILED with Reason, and no model
// call is made.
type BudgetSpentError struct{ Reason string }

func (e *BudgetSpentError) Error() string { return e.Reason }

// BudgetSpent reports whether err refused a call for the caller's budget,
// and why.
func BudgetSpent(err error) (string, bool) {
	var b *BudgetSpentError
	if errors.As(err, &b) {
		return b.Reason, true
	}
	return "", false
}

// reserve reserves a call with s; a Spend that does nothing when s is nil.
func reserve(ctx context.Context, s Spender, model string) (Spend, error) {
	if s == nil {
		return noSpend{}, nil
	}
	return s.Reserve(ctx, model)
}

type noSpend struct{}

func (noSpend) Settle(*Usage, string, bool) {}
