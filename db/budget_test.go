package db_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// A caller's calls a day are counted before each call starts, one at a
// time, so that concurrent calls never pass the budget together.
func TestCallerSpendReserve_NeverPastTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "a", db.CallerBudget{ModelCallsPerDay: 10}))
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "b", db.CallerBudget{SpendPerDayUSD: 0.05}))

	reserve := func(caller string, usd float64, n int) int {
		var (
			ok atomic.Int32
			wg sync.WaitGroup
		)
		for range n {
			wg.Go(func() {
				_, got, err := db.CallerSpendReserve(ctx, d.Pool, caller, usd)
				require.NoError(t, err)
				if got {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		return int(ok.Load())
	}
	require.Equal(t, 10, reserve("a", 0.001, 30), "10 calls a day")
	require.Equal(t, 5, reserve("b", 0.01, 30), "$0.05 a day at $0.01 a call")
	require.Equal(t, 30, reserve("c", 0.01, 30), "no budget: every call, counted")
	require.Equal(t, 0, reserve("b", 0.10, 1), "a call that alone costs more than the budget")

	b, u, reset, err := db.CallerToday(ctx, d.Pool, "a")
	require.NoError(t, err)
	require.Equal(t, db.CallerBudget{ModelCallsPerDay: 10}, b)
	require.Equal(t, 10, u.ModelCalls)
	require.InDelta(t, 0.01, u.SpendUSD, 1e-9)
	require.True(t, reset.After(time.Now()) && reset.Before(time.Now().Add(24*time.Hour+time.Minute)), "resets at the next UTC midnight: %s", reset)
	require.Zero(t, reset.UTC().Hour())

	// A correction from the call's usage, and a call taken back.
	require.NoError(t, db.CallerSpendAdd(ctx, d.Pool, "a", u.Day, -1, 0.004))
	_, u, _, err = db.CallerToday(ctx, d.Pool, "a")
	require.NoError(t, err)
	require.Equal(t, 9, u.ModelCalls)
	require.InDelta(t, 0.014, u.SpendUSD, 1e-9)
	require.Equal(t, 1, reserve("a", 0.001, 3), "the call taken back can be made")

	// Raising the budget lets the caller go on today; removing it, too.
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "a", db.CallerBudget{ModelCallsPerDay: 12}))
	require.Equal(t, 2, reserve("a", 0.001, 3))
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "a", db.CallerBudget{}))
	require.Equal(t, 3, reserve("a", 0.001, 3))

	top, others, err := db.CallerSpendTop(ctx, d.Pool, 2)
	require.NoError(t, err)
	require.Len(t, top, 2)
	require.Equal(t, "c", top[0].Caller, "the most spent first")
	require.Equal(t, 15, others.ModelCalls, "the rest summed: a's")
}

// Calls reserved together are granted as many as fit under the caller's
// calls and spend a day, never more, and concurrent reservers of one
// caller never pass the budget together.
func TestCallerSpendReserveMany_GrantsWhatFits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "calls", db.CallerBudget{ModelCallsPerDay: 10}))
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "usd", db.CallerBudget{SpendPerDayUSD: 0.05}))
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "both", db.CallerBudget{ModelCallsPerDay: 5, SpendPerDayUSD: 1}))
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "busy", db.CallerBudget{ModelCallsPerDay: 35}))

	reserve := func(caller string, n int, usd float64) int {
		t.Helper()
		day, granted, err := db.CallerSpendReserveMany(ctx, d.Pool, caller, n, usd)
		require.NoError(t, err)
		require.Equal(t, time.Now().UTC().Format(time.DateOnly), day.Format(time.DateOnly), "counted on today (UTC)")
		return granted
	}
	today := func(caller string) db.CallerUsage {
		t.Helper()
		_, u, _, err := db.CallerToday(ctx, d.Pool, caller)
		require.NoError(t, err)
		return u
	}

	require.Equal(t, []int{4, 4, 2, 0}, []int{reserve("calls", 4, 0.001), reserve("calls", 4, 0.001), reserve("calls", 4, 0.001), reserve("calls", 4, 0.001)},
		"10 calls a day, asked 4 at a time")
	require.Equal(t, 10, today("calls").ModelCalls)
	require.InDelta(t, 0.010, today("calls").SpendUSD, 1e-9, "only the granted calls are priced")

	require.Equal(t, []int{3, 2, 0}, []int{reserve("usd", 3, 0.01), reserve("usd", 3, 0.01), reserve("usd", 3, 0.01)},
		"$0.05 a day at $0.01 a call")
	require.Equal(t, 5, today("usd").ModelCalls)
	require.NoError(t, db.CallerSpendAdd(ctx, d.Pool, "usd", today("usd").Day, 0, 0.001))
	require.Equal(t, 0, reserve("usd", 1, 0), "not even a free call once the calls' usage took the spend past the budget")
	require.Equal(t, 3, reserve("both", 9, 0.3), "the spend binds before the calls: 3 × $0.30 of $1")
	require.Equal(t, 0, reserve("both", 9, 1.01), "a call that alone costs more than the budget")
	require.Equal(t, 50, reserve("free", 50, 0.01), "no budget: every call, counted")
	require.Equal(t, 50, today("free").ModelCalls)

	// Eight sets of 10 at once, the day's row not there yet: against 35
	// calls, 35 granted in all; against 15, where two sets that both found
	// no row would pass it, 15.
	together := func(caller string) int {
		var (
			total atomic.Int32
			wg    sync.WaitGroup
		)
		for range 8 {
			wg.Go(func() {
				_, granted, err := db.CallerSpendReserveMany(ctx, d.Pool, caller, 10, 0.001)
				require.NoError(t, err)
				total.Add(int32(granted))
			})
		}
		wg.Wait()
		return int(total.Load())
	}
	require.Equal(t, 35, together("busy"))
	require.Equal(t, 35, today("busy").ModelCalls)
	require.NoError(t, db.CallerBudgetSet(ctx, d.Pool, "first", db.CallerBudget{ModelCallsPerDay: 15}))
	require.Equal(t, 15, together("first"))
	require.Equal(t, 15, today("first").ModelCalls)
}

// A lease renewal sees the other live leases, not expired ones, and runs
// one at a time per account.
func TestLLMLeaseRenew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	grant := func(holder string, share float64, ttl time.Duration) (db.LLMAccount, []db.LLMLease) {
		var seen []db.LLMLease
		acct, l, err := db.LLMLeaseRenew(ctx, d.Pool, "acct", "api.example", holder, ttl, func(a db.LLMAccount, others []db.LLMLease) db.LLMLease {
			seen = others
			return db.LLMLease{Share: share, Slots: 2, Demand: []byte(`{"i":1}`)}
		})
		require.NoError(t, err)
		require.Equal(t, holder, l.Holder)
		require.True(t, l.ExpiresAt.After(acct.Now))
		return acct, seen
	}
	acct, seen := grant("p1", 0.5, time.Minute)
	require.Empty(t, seen)
	require.Equal(t, 1.0, acct.Factor)
	// Long enough to be live at the next renewal on a busy machine.
	_, seen = grant("p2", 0.25, 2*time.Second)
	require.Len(t, seen, 1)
	require.Equal(t, "p1", seen[0].Holder)
	require.Equal(t, 0.5, seen[0].Share)
	require.JSONEq(t, `{"i":1}`, string(seen[0].Demand))
	_, seen = grant("p1", 0.5, time.Minute)
	require.Len(t, seen, 1, "p2's lease is live")
	require.Eventually(t, func() bool { _, seen = grant("p1", 0.5, time.Minute); return len(seen) == 0 },
		dbtest.Patience(), 50*time.Millisecond, "p2's lease expired: p1 no longer sees it")
	require.NoError(t, db.LLMLeaseDelete(ctx, d.Pool, "acct", "p1"))
	_, seen = grant("p3", 0.5, time.Minute)
	require.Empty(t, seen, "p1 gave its lease up")

	// Renewals of one account take turns.
	var (
		wg     sync.WaitGroup
		inside atomic.Int32
		most   atomic.Int32
	)
	for i := range 8 {
		wg.Go(func() {
			_, _, err := db.LLMLeaseRenew(ctx, d.Pool, "acct", "api.example", string(rune('a'+i)), time.Minute,
				func(db.LLMAccount, []db.LLMLease) db.LLMLease {
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(5 * time.Millisecond) // a decision that takes time, to overlap if it could
					inside.Add(-1)
					return db.LLMLease{Demand: []byte(`{}`)}
				})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), most.Load())
}

// A throttle sets the account's cool-down and lowers its factor once per
// damp, however many calls were refused together.
func TestLLMAccountThrottle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	read := func() db.LLMAccount {
		acct, _, err := db.LLMLeaseRenew(ctx, d.Pool, "acct", "api.example", "p", time.Minute,
			func(db.LLMAccount, []db.LLMLease) db.LLMLease { return db.LLMLease{Demand: []byte(`{}`)} })
		require.NoError(t, err)
		return acct
	}
	before := read()
	for range 5 {
		require.NoError(t, db.LLMAccountThrottle(ctx, d.Pool, "acct", 3*time.Second, 0.8, 0.25, time.Minute, 0))
	}
	after := read()
	require.WithinDuration(t, before.Now.Add(3*time.Second), after.CooldownUntil, time.Second)
	require.Less(t, after.Factor, 0.8*0.8*0.8*0.8, "damp 0: every throttle lowers it")
	require.GreaterOrEqual(t, after.Factor, 0.25)

	require.NoError(t, db.LLMAccountThrottle(ctx, d.Pool, "acct", 0, 0.5, 0.25, time.Hour, time.Hour))
	again := read()
	require.Equal(t, after.Factor, again.Factor, "within damp of the last drop: not lowered again")
	require.Equal(t, after.CooldownUntil, again.CooldownUntil, "an earlier until does not shorten the cool-down")

	require.NoError(t, db.LLMAccountStated(ctx, d.Pool, "acct", 500, 0))
	require.NoError(t, db.LLMAccountStated(ctx, d.Pool, "acct", 0, 90_000))
	stated := read()
	require.Equal(t, 500, stated.StatedRPM)
	require.Equal(t, 90_000, stated.StatedTPM)
}
