package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// uploadRows writes a list of n rows, prefix1.com to prefixN.com, as an
// upload does, and returns it.
func uploadRows(t *testing.T, exec db.DBTX, prefix string, n int) *classifier.List {
	t.Helper()
	ctx := context.Background()
	l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Rows: n, Domains: n, ChunkRows: n, Chunks: 1, Retention: time.Hour}
	require.NoError(t, db.ListInsert(ctx, exec, l, 0))
	src := &rowSlice{}
	for i := 1; i <= n; i++ {
		d := fmt.Sprintf("%s%d.com", prefix, i)
		src.add(db.ListRowIn{Row: i, Input: d, Domain: d})
	}
	_, err := db.ListRowsCopy(ctx, exec, l.ID, src)
	require.NoError(t, err)
	return l
}

// modelAnswer is the model's answer of row i of list l (uploadRows).
func modelAnswer(prefix string, i, confidence int) db.RowAnswer {
	d := fmt.Sprintf("%s%d.com", prefix, i)
	return db.RowAnswer{Row: i, Owner: "river:1", Result: classifier.Result{Domain: d, Classifier: "cpg", Status: classifier.StatusCompleted,
		Answer: true, Confidence: confidence, Reasoning: "Sells " + d, Source: classifier.SourceLLM, ClassifiedAt: time.Now(),
		Model: "m", PromptVersion: "v2", ProvenanceID: uuid.Must(uuid.NewV7()), Usage: &classifier.Usage{PromptTokens: 10, CostUSD: 0.001}}}
}

// doneLog records the done callbacks of answers handed to a row store.
type doneLog struct {
	mu    sync.Mutex
	calls map[string][]error // by answer key: each call's error
	n     atomic.Int64       // first calls
	all   chan struct{}
	want  int64
}

func newDoneLog(want int) *doneLog {
	return &doneLog{calls: map[string][]error{}, all: make(chan struct{}), want: int64(want)}
}

func (l *doneLog) done(key string) func(error) {
	return func(err error) {
		l.mu.Lock()
		l.calls[key] = append(l.calls[key], err)
		first := len(l.calls[key]) == 1
		l.mu.Unlock()
		if first && l.n.Add(1) == l.want {
			close(l.all)
		}
	}
}

// wait waits for every answer's first done, for the tests' patience.
func (l *doneLog) wait(t *testing.T) {
	t.Helper()
	select {
	case <-l.all:
	case <-time.After(dbtest.Patience()):
		t.Fatalf("%d of %d answers' done called", l.n.Load(), l.want)
	}
}

// settle puts one more answer (on a list of its own) and waits for its
// done: the store stores its sets one after another, so the sets before
// it have told all theirs by then.
func settle(t *testing.T, s *jobs.RowStore, exec db.DBTX) {
	t.Helper()
	l := uploadRows(t, exec, "settle", 1)
	got := make(chan error, 2)
	s.Put(l.ID, modelAnswer("settle", 1, 4), func(err error) { got <- err })
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(dbtest.Patience()):
		t.Fatal("the last answer was never stored")
	}
}

// transactions is how many transactions made list l's rows final: each
// wrote its own xmin.
func transactions(t *testing.T, exec db.DBTX, ids ...uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, exec.QueryRow(context.Background(), `SELECT count(DISTINCT xmin::text) FROM list_row
		WHERE list_id = ANY($1) AND status <> 'PENDING'`, ids).Scan(&n))
	return n
}

// batchFailures counts the statement batches (a row store's sets) that
// failed on a pool: give it as db.Config.Tracer.
type batchFailures struct{ n atomic.Int64 }

func (*batchFailures) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (*batchFailures) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (*batchFailures) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (*batchFailures) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *batchFailures) TraceBatchEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	if data.Err != nil {
		b.n.Add(1)
	}
}

func TestRowStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswersPutAtOnceAreStoredInAFewTransactions", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		a, b := uploadRows(t, d.Pool, "a", 150), uploadRows(t, d.Pool, "b", 150)
		s := &jobs.RowStore{DB: d.Pool, Every: 50 * time.Millisecond, Max: jobs.DefaultRowStoreMax, RetryFor: time.Second, Logger: testLogger(t)}
		log := newDoneLog(300)
		var g sync.WaitGroup
		for w := range 30 { // 30 chunks' domains answered at once, 10 each
			g.Go(func() {
				for i := w*5 + 1; i <= w*5+5; i++ {
					s.Put(a.ID, modelAnswer("a", i, 4), log.done(fmt.Sprintf("a%d", i)))
					s.Put(b.ID, modelAnswer("b", i, 4), log.done(fmt.Sprintf("b%d", i)))
				}
			})
		}
		g.Wait()
		log.wait(t)
		settle(t, s, d.Pool)
		log.mu.Lock()
		for key, calls := range log.calls {
			require.Equal(t, []error{nil}, calls, "answer %s: its done, once, with no error", key)
		}
		require.Len(t, log.calls, 300)
		log.mu.Unlock()

		for _, l := range []*classifier.List{a, b} {
			now, err := db.ListGet(ctx, d.Pool, l.ID)
			require.NoError(t, err)
			require.Equal(t, []int{150, 150, 150}, []int{now.Done, now.Completed, now.LLM})
		}
		n := transactions(t, d.Pool, a.ID, b.ID)
		require.LessOrEqual(t, n, 10, "300 answers of two lists, handed over at once, are stored in a few transactions")
		t.Logf("300 answers stored in %d transactions", n)
	})

	t.Run("AListThatCannotBeStoredHoldsNoOtherList", func(t *testing.T) {
		t.Parallel()
		failures := &batchFailures{}
		d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: dbtest.Schema(t), Tracer: failures})
		require.NoError(t, err)
		t.Cleanup(d.Close)
		good, bad := uploadRows(t, d.Pool, "good", 5), uploadRows(t, d.Pool, "bad", 5)
		// Tried for a second, 100 ms apart at first: twice at least.
		s := &jobs.RowStore{DB: d.Pool, Every: 50 * time.Millisecond, Max: jobs.DefaultRowStoreMax, RetryFor: time.Second, Logger: testLogger(t)}
		log := newDoneLog(10)
		for i := 1; i <= 5; i++ {
			confidence := 4
			if i == 3 {
				confidence = 9 // list_row's and result's CHECK refuse it
			}
			s.Put(bad.ID, modelAnswer("bad", i, confidence), log.done(fmt.Sprintf("bad%d", i)))
			s.Put(good.ID, modelAnswer("good", i, 4), log.done(fmt.Sprintf("good%d", i)))
		}
		log.wait(t)
		settle(t, s, d.Pool)
		log.mu.Lock()
		defer log.mu.Unlock()
		for i := 1; i <= 5; i++ {
			require.Equal(t, []error{nil}, log.calls[fmt.Sprintf("good%d", i)], "good row %d: stored, told once", i)
			calls := log.calls[fmt.Sprintf("bad%d", i)]
			require.Len(t, calls, 1, "bad row %d: told once", i)
			require.ErrorContains(t, calls[0], "confidence", "bad row %d: its set's error", i)
		}
		require.GreaterOrEqual(t, failures.n.Load(), int64(3),
			"the set of both lists failed, then the bad list's alone, and again before its answers were given up")
		now, err := db.ListGet(ctx, d.Pool, good.ID)
		require.NoError(t, err)
		require.Equal(t, 5, now.Completed, "the good list's answers are stored")
		now, err = db.ListGet(ctx, d.Pool, bad.ID)
		require.NoError(t, err)
		require.Zero(t, now.Done, "the bad list's set is stored whole or not at all")
	})
}
