package jobs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// beginCounter is the pool, counting the transactions begun on it (n,
// counted as Begin is asked) and those ended (a failed Begin, or the first
// Commit or Rollback once it returned): the gates hold none once they are
// equal.
type beginCounter struct {
	db.Executor
	n, ended atomic.Int64
}

func (c *beginCounter) Begin(ctx context.Context) (pgx.Tx, error) {
	c.n.Add(1)
	tx, err := c.Executor.Begin(ctx)
	if err != nil {
		c.ended.Add(1)
		return nil, err
	}
	return &countedTx{Tx: tx, c: c}, nil
}

type countedTx struct {
	pgx.Tx
	c    *beginCounter
	once sync.Once
}

func (x *countedTx) Commit(ctx context.Context) error {
	defer x.once.Do(func() { x.c.ended.Add(1) })
	return x.Tx.Commit(ctx)
}

func (x *countedTx) Rollback(ctx context.Context) error {
	defer x.once.Do(func() { x.c.ended.Add(1) })
	return x.Tx.Rollback(ctx)
}

// gateBundle is a list of caller "test" on a schema of the test's own, and
// the process's gates on a pool that counts its transactions.
type gateBundle struct {
	db     *db.DB
	begins *beginCounter
	gates  *jobs.ListGates
	list   *classifier.List
}

func setupGates(t *testing.T, window time.Duration) *gateBundle {
	t.Helper()
	d := dbtest.New(t)
	c := &beginCounter{Executor: d.Pool}
	return &gateBundle{db: d, begins: c, list: storedList(t, d.Pool, "test", month, "a.example"),
		gates: &jobs.ListGates{DB: c, Window: window, Logger: testLogger(t)}}
}

// cancel cancels the list as the API does: ListCancel in a transaction of
// its own.
func (b *gateBundle) cancel(ctx context.Context) error {
	return pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		_, ended, err := db.ListCancel(ctx, tx, b.list.ID, "test")
		if err == nil && !ended {
			err = errors.New("the list was not cancelled")
		}
		return err
	})
}

// sessions counts the test's Postgres sessions that match cond (on
// pg_stat_activity).
func (b *gateBundle) sessions(t *testing.T, cond string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND `+cond, b.db.Schema).Scan(&n))
	return n
}

// idle waits until the gates hold no transaction (every one begun has
// ended), and checks that Postgres agrees: no session of the test's is
// left in a transaction.
func (b *gateBundle) idle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return b.begins.ended.Load() == b.begins.n.Load() },
		dbtest.Patience(), 5*time.Millisecond, "the gate transactions end once no call comes")
	require.Zero(t, b.sessions(t, idleInTx), "a gate transaction left open")
}

const (
	waitingForLock = `wait_event_type = 'Lock' AND wait_event = 'advisory'`
	idleInTx       = `state LIKE 'idle in transaction%'`
)

func TestListGates_CallsStartingTogetherShareOneTransaction(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	b := setupGates(t, 0)
	gate := b.gates.Gate(b.list.ID)

	// Another caller's cancel holds the list's gate lock (it cancels
	// nothing), so the first call's opening waits while the rest come.
	blocker, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, blocker)
	_, ended, err := db.ListCancel(ctx, blocker, b.list.ID, "another caller")
	require.NoError(t, err)
	require.False(t, ended)

	// Each call releases once every call has entered (or the test ends).
	const calls = 50
	allIn := make(chan struct{})
	var closeOnce sync.Once
	letGo := func() { closeOnce.Do(func() { close(allIn) }) }
	defer letGo()
	in := make(chan error, calls)
	for range calls {
		go func() {
			release, err := gate(ctx)
			in <- err
			if err == nil {
				<-allIn
				release()
			}
		}()
	}
	require.Eventually(t, func() bool { return jobs.GateHeld(b.gates, b.list.ID) == calls },
		dbtest.Patience(), 5*time.Millisecond, "the calls wait for one opening")
	db.Rollback(ctx, blocker)

	for range calls {
		require.NoError(t, <-in)
	}
	require.EqualValues(t, 1, b.begins.n.Load(), "transactions opened for %d calls", calls)
	letGo()
	// The transaction commits once its calls released and its window is
	// over.
	b.idle(t)

	// A call after the window opens the next transaction, which commits
	// at the end of its window: idle gates hold no transaction.
	release, err := gate(ctx)
	require.NoError(t, err)
	release()
	require.EqualValues(t, 2, b.begins.n.Load())
	b.idle(t)
	require.EqualValues(t, 2, b.begins.n.Load())
}

func TestListGates_CancelWaitsForAHeldCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupGates(t, 0)
	gate := b.gates.Gate(b.list.ID)

	release, err := gate(ctx)
	require.NoError(t, err)
	defer release()
	cancelled := make(chan error, 1)
	go func() { cancelled <- b.cancel(ctx) }()

	// The cancel waits for the call's transaction, beyond its window.
	deadline := time.Now().Add(dbtest.Patience())
	for b.sessions(t, waitingForLock) == 0 || jobs.GateHeld(b.gates, b.list.ID) != 0 {
		select {
		case err := <-cancelled:
			t.Fatalf("the cancel ended while a call held the gate: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the cancel never waited for the call, or the window never ended")
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-cancelled:
		t.Fatalf("the cancel ended while a call held the gate: %v", err)
	default:
	}
	require.Equal(t, 1, b.sessions(t, waitingForLock), "the cancel still waits once the window is over")

	release()
	select {
	case err := <-cancelled:
		require.NoError(t, err)
	case <-time.After(dbtest.Patience()):
		t.Fatal("the cancel did not commit once the call released")
	}
	_, err = gate(ctx)
	require.ErrorIs(t, err, db.ErrListEnded)
	b.idle(t)
}

func TestListGates_CallsArrivingContinuouslyDoNotStarveACancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const window = 50 * time.Millisecond
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	b := setupGates(t, window)
	gate := b.gates.Gate(b.list.ID)

	// Two callers whose calls overlap: each holds the gate until the other
	// has entered again (or a window has passed, as a slow request would),
	// so the list's calls never all release at once.
	var entries atomic.Int64
	entered := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	stopped := make(chan error, 2)
	for i := range 2 {
		go func() {
			for ctx.Err() == nil {
				release, err := gate(ctx)
				if err != nil {
					stopped <- err
					return
				}
				entries.Add(1)
				select {
				case <-entered[i]: // the other's entry before this one
				default:
				}
				select {
				case entered[1-i] <- struct{}{}:
				default:
				}
				held := time.NewTimer(window)
				select {
				case <-entered[i]:
				case <-held.C:
				}
				held.Stop()
				release()
			}
			stopped <- ctx.Err()
		}()
	}
	require.Eventually(t, func() bool {
		return entries.Load() >= 20
	}, dbtest.Patience(), 5*time.Millisecond, "calls flow through the gate")

	start := time.Now()
	bound := 10*window + dbtest.Patience()
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	require.NoError(t, b.cancel(cctx), "the cancel commits within %s while calls keep coming", bound)
	t.Logf("the cancel committed in %s, after %d calls in %d gate transactions", time.Since(start), entries.Load(), b.begins.n.Load())
	for range 2 {
		require.ErrorIs(t, <-stopped, db.ErrListEnded)
	}
	_, err := gate(ctx)
	require.ErrorIs(t, err, db.ErrListEnded)
	b.idle(t)
}

func TestListGates_EndedListIsRefusedWithoutPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupGates(t, 0)
	gate := b.gates.Gate(b.list.ID)
	require.NoError(t, b.cancel(ctx))

	_, err := gate(ctx)
	require.ErrorIs(t, err, db.ErrListEnded)
	require.EqualValues(t, 1, b.begins.n.Load())
	for range 3 {
		_, err = gate(ctx)
		require.ErrorIs(t, err, db.ErrListEnded)
	}
	require.EqualValues(t, 1, b.begins.n.Load(), "an ended list is refused without a transaction")
}
