package spend_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/spend"
)

// spendWrites counts the statements a pool sends on the callers' day rows.
type spendWrites struct{ n atomic.Int64 }

func (c *spendWrites) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "caller_spend") {
		c.n.Add(1)
	}
	return ctx
}

func (c *spendWrites) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type spendSetBundle struct {
	spend  *spend.Spenders
	reads  *db.DB // for the test's own look-ups, not counted
	writes *spendWrites
}

func setupSpendSet(t *testing.T) *spendSetBundle {
	t.Helper()
	schema := dbtest.Schema(t)
	writes := &spendWrites{}
	counted, err := db.Open(context.Background(), db.Config{URL: dbtest.URL(), Schema: schema, Tracer: writes})
	require.NoError(t, err)
	t.Cleanup(counted.Close)
	reads, err := db.Open(context.Background(), db.Config{URL: dbtest.URL(), Schema: schema})
	require.NoError(t, err)
	t.Cleanup(reads.Close)
	return &spendSetBundle{
		spend:  &spend.Spenders{DB: counted.Pool, Price: testPrice, Logger: slog.New(slog.DiscardHandler)},
		reads:  reads,
		writes: writes,
	}
}

func (b *spendSetBundle) today(t *testing.T, caller string) db.CallerUsage {
	t.Helper()
	_, u, _, err := db.CallerToday(context.Background(), b.reads.Pool, caller)
	require.NoError(t, err)
	return u
}

// A call's usage, and what testPrice makes of it.
var (
	setUsage = &classifier.Usage{PromptTokens: 1000, CompletionTokens: 100}
	setPrice = (1000*1 + 100*2) / 1e6
)

// draw reserves n calls of set at once, and settles each reserved one:
// called with setUsage, but the first notCalled of them taken back. It
// returns how many were reserved and the errors of the refused.
func draw(t *testing.T, set classifier.Spender, n, notCalled int) (int, []error) {
	t.Helper()
	var (
		mu      sync.Mutex
		drawn   int
		refused []error
		wg      sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			sp, err := set.Reserve(context.Background(), "m")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
				return
			}
			drawn++
			if drawn <= notCalled {
				sp.Settle(nil, "m", false)
				return
			}
			sp.Settle(setUsage, "m", true)
		})
	}
	wg.Wait()
	return drawn, refused
}

// A set prepared for more calls than the caller's budget has room for
// draws what fits and refuses the rest as a single call would be refused;
// once closed, the caller's day counts exactly the calls made, at their
// price, and none of the prepared calls it did not make.
func TestSpendSet_ExactAtTheBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSpendSet(t)
	require.NoError(t, db.CallerBudgetSet(ctx, b.reads.Pool, "a", db.CallerBudget{ModelCallsPerDay: 12}))

	set := b.spend.Set("a")
	require.NoError(t, set.Prepare(ctx, "m", 20))
	require.Equal(t, 12, b.today(t, "a").ModelCalls, "what fits is counted before any call starts")
	drawn, refused := draw(t, set, 20, 2)
	require.Equal(t, 12, drawn)
	require.Len(t, refused, 8)
	for _, err := range refused {
		reason, spent := classifier.BudgetSpent(err)
		require.True(t, spent, "refused for the budget: %v", err)
		require.Equal(t, spend.SpentReason, reason)
	}
	require.Equal(t, int64(1), b.writes.n.Load(), "one statement: the calls past the budget are refused without asking Postgres")
	require.Equal(t, 12, b.today(t, "a").ModelCalls, "the corrections wait in the set")

	require.NoError(t, set.Close(ctx))
	u := b.today(t, "a")
	require.Equal(t, 10, u.ModelCalls, "the 2 calls not made are given back")
	require.InDelta(t, 10*setPrice, u.SpendUSD, 1e-12, "at the price of their usage")
	require.Equal(t, int64(2), b.writes.n.Load())
	require.NoError(t, set.Close(ctx), "closing again")
	require.Equal(t, int64(2), b.writes.n.Load(), "closing again writes nothing")

	// A set with no budget, closed with prepared calls left.
	set = b.spend.Set("b")
	require.NoError(t, set.Prepare(ctx, "m", 20))
	drawn, refused = draw(t, set, 15, 2)
	require.Equal(t, 15, drawn)
	require.Empty(t, refused)
	require.Equal(t, 20, b.today(t, "b").ModelCalls)
	require.NoError(t, set.Close(ctx))
	u = b.today(t, "b")
	require.Equal(t, 13, u.ModelCalls, "the 5 calls not drawn and the 2 not made are given back")
	require.InDelta(t, 13*setPrice, u.SpendUSD, 1e-12)

	// After Close, a call (one that outlived its run) is counted on its
	// own, and taken back on its own.
	before := b.writes.n.Load()
	drawn, _ = draw(t, set, 1, 1)
	require.Equal(t, 1, drawn)
	require.Equal(t, before+2, b.writes.n.Load(), "its count and its taking back")
	require.Equal(t, 13, b.today(t, "b").ModelCalls)
}

// A set's calls cost a few statements on the caller's day row, not two a
// call: 200 calls prepared 50 at a time, flushed once on the way, closed.
func TestSpendSet_FewStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSpendSet(t)
	require.NoError(t, db.CallerBudgetSet(ctx, b.reads.Pool, "a", db.CallerBudget{ModelCallsPerDay: 1000}))

	// The counter sees the per-call path: two statements a call (here
	// each taken back, so none is left counted).
	for range 10 {
		drawn, _ := draw(t, b.spend.For("a"), 1, 1)
		require.Equal(t, 1, drawn)
	}
	require.Equal(t, int64(20), b.writes.n.Load())
	b.writes.n.Store(0)

	set := b.spend.Set("a")
	for i := range 4 {
		require.NoError(t, set.Prepare(ctx, "m", 50))
		drawn, refused := draw(t, set, 50, 0)
		require.Equal(t, 50, drawn)
		require.Empty(t, refused)
		if i == 1 {
			require.NoError(t, set.Flush(ctx))
			require.InDelta(t, 100*setPrice, b.today(t, "a").SpendUSD, 1e-12, "flushed: the day shows the calls' price")
		}
	}
	require.NoError(t, set.Close(ctx))
	require.LessOrEqual(t, b.writes.n.Load(), int64(5+1))
	u := b.today(t, "a")
	require.Equal(t, 200, u.ModelCalls)
	require.InDelta(t, 200*setPrice, u.SpendUSD, 1e-12)
}

// A correction handed over to be written in the caller's own transaction
// is written once; one whose write failed is put back and written later.
func TestSpendSet_TakeCorrection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSpendSet(t)

	set := b.spend.Set("a")
	require.NoError(t, set.Prepare(ctx, "m", 10))
	drawn, _ := draw(t, set, 10, 3)
	require.Equal(t, 10, drawn)
	day, calls, usd := set.TakeCorrection()
	require.Equal(t, -3, calls, "the calls not made")
	require.False(t, day.IsZero())
	_, again, _ := set.TakeCorrection()
	require.Zero(t, again, "handed over once")

	// The write fails (its transaction rolls back): put back.
	tx, err := b.reads.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, db.CallerSpendAdd(ctx, tx, "a", day, calls, usd))
	require.NoError(t, tx.Rollback(ctx))
	set.Restore(day, calls, usd)
	require.Equal(t, 10, b.today(t, "a").ModelCalls)

	// Written with the next one.
	tx, err = b.reads.Pool.Begin(ctx)
	require.NoError(t, err)
	day, calls, usd = set.TakeCorrection()
	require.NoError(t, db.CallerSpendAdd(ctx, tx, "a", day, calls, usd))
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, set.Close(ctx))
	u := b.today(t, "a")
	require.Equal(t, 7, u.ModelCalls)
	require.InDelta(t, 7*setPrice, u.SpendUSD, 1e-12)
}

// A nil set counts nothing, and is a Spender that does not count.
func TestSpendSet_Nil(t *testing.T) {
	t.Parallel()
	var s *spend.Spenders
	set := s.Set("a")
	require.Nil(t, set)
	var spender classifier.Spender = set
	sp, err := spender.Reserve(context.Background(), "m")
	require.NoError(t, err)
	sp.Settle(setUsage, "m", true)
	require.NoError(t, set.Prepare(context.Background(), "m", 5))
	require.NoError(t, set.Flush(context.Background()))
	require.NoError(t, set.Close(context.Background()))
}

// testPrice: $1 per million prompt tokens and $2 per million completion
// tokens, half in a batch.
func testPrice(_ string, promptTokens, completionTokens float64, batch bool) (float64, bool) {
	usd := (promptTokens*1 + completionTokens*2) / 1e6
	if batch {
		usd /= 2
	}
	return usd, true
}
