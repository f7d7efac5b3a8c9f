package jobs_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// rowSlice is a db.ListRowSource over rows read already.
type rowSlice struct {
	rows []db.ListRowIn
	i    int
}

func (s *rowSlice) Next() bool          { s.i++; return s.i <= len(s.rows) }
func (s *rowSlice) Row() db.ListRowIn   { return s.rows[s.i-1] }
func (s *rowSlice) Err() error          { return nil }
func (s *rowSlice) add(r db.ListRowIn)  { s.rows = append(s.rows, r) }
func (s *rowSlice) count() (n int)      { return len(s.rows) }
func (s *rowSlice) reset() *rowSlice    { s.i = 0; return s }
func (s *rowSlice) last() *db.ListRowIn { return &s.rows[len(s.rows)-1] }

// acceptList writes a list as the API does (jobs.AcceptList: rows, list,
// first chunk), in tx, chunked by s. Inputs are normalized; a repeated
// domain points at its first row.
func acceptList(t *testing.T, tx pgx.Tx, ins *jobs.Client, s jobs.Settings, callbackURL string, inputs ...string) *classifier.List {
	t.Helper()
	return acceptTier(t, tx, ins, s, &classifier.List{CallbackURL: callbackURL}, inputs...)
}

// acceptTier is acceptList for a list shaped by l (its tier and callback
// URL).
func acceptTier(t *testing.T, tx pgx.Tx, ins *jobs.Client, s jobs.Settings, l *classifier.List, inputs ...string) *classifier.List {
	t.Helper()
	return acceptAnswering(t, tx, ins, s, l, nil, inputs...)
}

// acceptAnswering is acceptTier, and with rules not nil, the upload
// answers the rows it can as the API's does (its Rows are set here).
func acceptAnswering(t *testing.T, tx pgx.Tx, ins *jobs.Client, s jobs.Settings, l *classifier.List, rules *jobs.AnswerRules, inputs ...string) *classifier.List {
	t.Helper()
	src := &rowSlice{}
	seen := map[string]int{}
	l.ID, l.Caller, l.Classifier = uuid.New(), "test", "cpg"
	for i, in := range inputs {
		src.add(db.ListRowIn{Row: i + 1, Input: in})
		d, err := classifier.NormalizeDomain(in)
		switch {
		case err != nil:
			src.last().Reason = err.Error()
			l.Rejected++
		case seen[d] > 0:
			src.last().Domain, src.last().FirstRow = d, seen[d]
			l.Duplicates++
		default:
			src.last().Domain, seen[d] = d, i+1
			l.Domains++
		}
	}
	l.Rows = src.count()
	a := jobs.ListAccept{List: l, Rows: src.reset()}
	if rules != nil {
		a.Answer = rules
		a.Answer.Rows = func() (db.ListRowSource, error) { return src.reset(), nil }
		a.Answer.Dir = t.TempDir()
	}
	_, err := jobs.AcceptList(context.Background(), tx, ins, s, a)
	require.NoError(t, err)
	return l
}

func listRows(t *testing.T, exec db.DBTX, l *classifier.List) map[int]classifier.ListRow {
	t.Helper()
	out := map[int]classifier.ListRow{}
	_, err := db.ListResultsPage(context.Background(), exec, db.ListResultsParams{ListID: l.ID, Through: l.Rows,
		ListStatus: l.Status, ListError: l.Error}, func(r *classifier.ListRow) bool { out[r.Row] = *r; return true })
	require.NoError(t, err)
	return out
}

// setupListTx is a txBundle whose worker works list chunks.
func setupListTx(t *testing.T, handle func(llmtest.Request) llmtest.Reply, s jobs.Settings) (*txBundle, *rivertest.Worker[jobs.ClassifyListArgs, pgx.Tx]) {
	t.Helper()
	b := setupTx(t, handle, setupOpts{})
	s.ListDomainConcurrency = 1 // a transaction is one connection
	logger := testLogger(t)
	w := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{Logger: logger}, &jobs.ClassifyListWorker{
		DB: b.tx, Pipeline: newPipeline(t, b.tx, b.llm, setupOpts{}, s, logger),
		Registry: classifier.DefaultRegistry(), Settings: s, Logger: logger,
	})
	return b, w
}

func listSettings(chunkRows, inFlight int) jobs.Settings {
	s := testSettings()
	s.ListChunkRows, s.ListChunksInFlight = chunkRows, inFlight
	return s
}

func TestClassifyListWorker_Work(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswersAChunkAndItsDuplicatesThenQueuesTheNext", func(t *testing.T) {
		t.Parallel()
		s := listSettings(3, 1)
		b, w := setupListTx(t, byDomain(map[string]llmtest.Reply{"crm.io": llmtest.Answer(false, 4, "Software.")}), s)
		_, _, err := db.OverrideSet(ctx, b.tx, []classifier.Override{{Classifier: "cpg", Domain: "unilever.com", Answer: true, Confidence: 5,
			Note: "Unilever makes soap and food.", SetBy: "test"}})
		require.NoError(t, err)
		// Chunk 0 is rows 1-3, chunk 1 rows 4-6; row 5 repeats row 1.
		l := acceptList(t, b.tx, b.client, s, "", "acme.com", "unilever.com", "localhost", "crm.io", "www.acme.com", "new.com")

		jobRow := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
		require.Equal(t, 0, jobRow.Args.Chunk)
		res, err := w.WorkJob(ctx, t, b.tx, jobRow.JobRow)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
		require.Equal(t, 1, b.llm.Calls("acme.com"))
		require.Zero(t, b.llm.Calls("unilever.com"), "an overridden domain needs no model")

		rows := listRows(t, b.tx, l)
		require.Equal(t, classifier.SourceLLM, rows[1].Result.Source)
		require.Equal(t, classifier.StatusCompleted, rows[5].Result.Status, "the duplicate in the next chunk has the answer too")
		require.Equal(t, rows[1].Result.Reasoning, rows[5].Result.Reasoning)
		require.Equal(t, classifier.SourceOverride, rows[2].Result.Source)
		require.Equal(t, classifier.StatusRejected, rows[3].Result.Status)
		require.Equal(t, classifier.StatusPending, rows[4].Result.Status, "chunk 1 is not answered yet")

		now, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusRunning, now.Status)
		require.Equal(t, []int{4, 3, 1, 1, 2}, []int{now.Done, now.Completed, now.Override, now.Rejected, now.LLM},
			"done counts the duplicate and the rejected row")
		var out jobs.ListChunkOutput
		require.NoError(t, json.Unmarshal(res.Job.Output(), &out))
		// The override answered its row as a set, before the chunk's
		// domains: the run had one domain to answer.
		require.Equal(t, jobs.ListChunkOutput{ListID: l.ID.String(), Chunk: 0, Domains: 1, Counts: jobs.Counts{Override: 1, LLM: 1},
			ListDone: 4, ListRows: 6}, out)

		// Chunk 0 queued chunk 1 once all its domains had started.
		next := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, []rivertest.ExpectedJob{
			{Args: &jobs.ClassifyListArgs{}}, {Args: &jobs.ClassifyListArgs{}}})
		var second jobs.ClassifyListArgs
		require.NoError(t, json.Unmarshal(next[1].EncodedArgs, &second))
		require.Equal(t, jobs.ClassifyListArgs{ListID: l.ID.String(), Chunk: 1}, second)
	})

	t.Run("TheLastChunkEndsTheListWithItsWebhook", func(t *testing.T) {
		t.Parallel()
		s := listSettings(2, 2)
		b, w := setupListTx(t, byDomain(nil), s)
		l := acceptList(t, b.tx, b.client, s, "https://example.com/hooks", "a.com", "b.com", "c.com", "a.com")
		first := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
		_, err := w.WorkJob(ctx, t, b.tx, first.JobRow)
		require.NoError(t, err)
		chunks := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, []rivertest.ExpectedJob{
			{Args: &jobs.ClassifyListArgs{}}, {Args: &jobs.ClassifyListArgs{}}})
		_, err = w.WorkJob(ctx, t, b.tx, chunks[1])
		require.NoError(t, err)
		now, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusCompleted, now.Status)
		require.Equal(t, 4, now.Done)
		require.Equal(t, 3, b.llm.Total(), "a duplicate is answered once")
		hook := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.WebhookArgs{}, &rivertest.RequireInsertedOpts{Queue: jobs.QueueWebhook})
		require.Equal(t, l.ID.String(), hook.Args.ListID)
		require.True(t, now.CompletedAt.Equal(hook.Args.EndedAt))
	})

	t.Run("AListKeepsItsChunksInFlightQueuedWhileTheyRun", func(t *testing.T) {
		t.Parallel()
		s := listSettings(1, 3) // a chunk a row, 3 in flight
		b, w := setupListTx(t, byDomain(nil), s)
		l := acceptList(t, b.tx, b.client, s, "", "a.com", "b.com", "c.com", "d.com", "e.com", "f.com")
		// available lists the list's chunk jobs waiting to run, by chunk.
		available := func() map[int]*rivertype.JobRow {
			res, err := b.client.JobListTx(ctx, b.tx, river.NewJobListParams().Kinds(jobs.ClassifyListArgs{}.Kind()).
				States(rivertype.JobStateAvailable).First(100))
			require.NoError(t, err)
			out := map[int]*rivertype.JobRow{}
			for _, j := range res.Jobs {
				var a jobs.ClassifyListArgs
				require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
				require.Equal(t, l.ID.String(), a.ListID)
				out[a.Chunk] = j
			}
			return out
		}
		queued := func() []int {
			return slices.Sorted(maps.Keys(available()))
		}
		require.Equal(t, []int{0}, queued(), "the upload queues the first chunk alone")
		work := func(chunk int) {
			t.Helper()
			j := available()[chunk]
			require.NotNil(t, j, "chunk %d is not queued", chunk)
			_, err := w.WorkJob(ctx, t, b.tx, j)
			require.NoError(t, err)
		}
		work(0)
		require.Equal(t, []int{1, 2, 3}, queued(), "chunk 0 queued one as it started, one once all its domains had, one as it ended")
		work(1)
		require.Equal(t, []int{2, 3, 4}, queued(), "from chunk 1 on, each queues one as its domains have all started: 3 in flight")
		work(2)
		require.Equal(t, []int{3, 4, 5}, queued())
	})

	t.Run("AChunkOfACancelledListIsCancelledWithoutAModelCall", func(t *testing.T) {
		t.Parallel()
		s := listSettings(10, 1)
		b, w := setupListTx(t, byDomain(nil), s)
		l := acceptList(t, b.tx, b.client, s, "", "a.com", "b.com")
		_, ended, err := db.ListCancel(ctx, b.tx, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		jobRow := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
		res, err := w.WorkJob(ctx, t, b.tx, jobRow.JobRow)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCancelled, res.Job.State)
		require.Zero(t, b.llm.Total())
	})
}

// TestClassifyListWorker_WithRiver runs lists in a started River client.
func TestClassifyListWorker_WithRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setupLists := func(t *testing.T, handle func(llmtest.Request) llmtest.Reply, s func(*jobs.Settings)) *testBundle {
		return setup(t, handle, setupOpts{settings: func(st *jobs.Settings) {
			st.ListChunkRows, st.ListChunksInFlight = 4, 2
			if s != nil {
				s(st)
			}
		}})
	}
	submitList := func(t *testing.T, b *testBundle, inputs ...string) *classifier.List {
		t.Helper()
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer db.Rollback(ctx, tx)
		s := testSettings()
		s.ListChunkRows, s.ListChunksInFlight = 4, 2
		l := acceptList(t, tx, b.client, s, "", inputs...)
		require.NoError(t, tx.Commit(ctx))
		return l
	}
	waitList := func(t *testing.T, b *testBundle, id uuid.UUID, status classifier.Status) *classifier.List {
		t.Helper()
		var l *classifier.List
		require.Eventually(t, func() bool {
			var err error
			l, err = db.ListGet(ctx, b.db.Pool, id)
			require.NoError(t, err)
			return l.Status == status
		}, dbtest.Patience(), 20*time.Millisecond, "list never reached %s", status)
		return l
	}

	t.Run("AListOfManyChunksCompletesPayingOncePerDomain", func(t *testing.T) {
		t.Parallel()
		b := setupLists(t, byDomain(nil), nil)
		var inputs []string
		for i := range 30 {
			inputs = append(inputs, "brand"+string(rune('a'+i%26))+string(rune('a'+i/26))+".com")
		}
		inputs = append(inputs, inputs[:5]...)
		l := submitList(t, b, inputs...)
		done := waitList(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, 35, done.Done)
		require.Equal(t, 35, done.Completed)
		require.Equal(t, 30, b.llm.Total(), "one call per distinct domain")
		for _, r := range listRows(t, b.db.Pool, done) {
			require.Equal(t, classifier.StatusCompleted, r.Result.Status, "row %d", r.Row)
		}
	})

	t.Run("NoModelCallStartsOnceACancelReturns", func(t *testing.T) {
		t.Parallel()
		var (
			mu        sync.Mutex
			cancelled time.Time
			late      []string
		)
		release := make(chan struct{})
		b := setupLists(t, func(r llmtest.Request) llmtest.Reply {
			mu.Lock()
			if !cancelled.IsZero() {
				late = append(late, r.Domain)
			}
			mu.Unlock()
			a := llmtest.Answer(true, 4, "x")
			a.Wait = release
			return a
		}, func(s *jobs.Settings) { s.ListDomainConcurrency = 2 })
		var inputs []string
		for i := range 40 {
			inputs = append(inputs, "cancel"+string(rune('a'+i%26))+string(rune('a'+i/26))+".com")
		}
		l := submitList(t, b, inputs...)
		require.Eventually(t, func() bool { return b.llm.Total() >= 4 }, dbtest.Patience(), 10*time.Millisecond,
			"two chunks of two domains each wait for the model")

		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		_, ended, err := db.ListCancel(ctx, tx, l.ID, "test")
		require.NoError(t, err)
		require.True(t, ended)
		require.NoError(t, tx.Commit(ctx))
		mu.Lock()
		cancelled = time.Now()
		mu.Unlock()
		inFlight := b.llm.Total()
		close(release) // the calls in flight finish; nothing new may start

		require.Eventually(t, func() bool {
			res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds("classify_list").States(
				rivertype.JobStateRunning, rivertype.JobStateAvailable))
			require.NoError(t, err)
			return len(res.Jobs) == 0
		}, dbtest.Patience(), 20*time.Millisecond, "the running chunks stop")
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, late, "model calls started after the cancel returned")
		require.Equal(t, inFlight, b.llm.Total())
		now, err := db.ListGet(ctx, b.db.Pool, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusCancelled, now.Status)
		require.Equal(t, inFlight, now.Completed, "the answers in flight are kept")
	})

	t.Run("AModelOutageShowsOnTheListsStatus", func(t *testing.T) {
		// Issue 36: during a model outage the list showed nothing (failed
		// 0, no retries, no last error).
		t.Parallel()
		var down atomic.Bool
		down.Store(true)
		b := setupLists(t, func(llmtest.Request) llmtest.Reply {
			if down.Load() {
				return llmtest.Status(http.StatusServiceUnavailable, nil)
			}
			return llmtest.Answer(true, 4, "Food.")
		}, fastDomainRetries)
		l := submitList(t, b, "a.com", "b.com")
		var now *classifier.List
		require.Eventually(t, func() bool {
			var err error
			now, err = db.ListGet(context.Background(), b.db.Pool, l.ID)
			require.NoError(t, err)
			return now.RunErrors > 0
		}, dbtest.Patience(), 20*time.Millisecond)
		require.Equal(t, "the model provider answered 503 Service Unavailable", now.LastError)
		require.NotNil(t, now.LastErrorAt)
		require.Equal(t, "its work failed and is being retried with backoff: the model provider answered 503 Service Unavailable", now.Waiting)
		require.NotContains(t, now.LastError, b.llm.URL, "no address reaches the caller")

		down.Store(false)
		done := waitList(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, 2, done.Completed)
		require.Empty(t, done.Waiting, "its work moved: it waits for nothing")
		require.Equal(t, now.LastError, done.LastError, "the last failure stays on record")
	})

	t.Run("AChunkOutOfAttemptsFailsItsRowsEachWithItsOwnReason", func(t *testing.T) {
		t.Parallel()
		b := setupLists(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusServiceUnavailable, nil) },
			func(s *jobs.Settings) { s.MaxAttempts = 1; fastDomainRetries(s) })
		l := submitList(t, b, "a.com", "b.com", "c.com", "d.com", "e.com", "a.com")
		done := waitList(t, b, l.ID, classifier.StatusCompleted)
		require.Empty(t, done.Error, "no chunk fails the list")
		require.Equal(t, 6, done.Failed)
		rows := listRows(t, b.db.Pool, done)
		for _, r := range rows {
			require.Equal(t, classifier.StatusFailed, r.Result.Status, "row %d", r.Row)
			require.Contains(t, r.Result.Error, "gave up after 1 attempts")
			require.Contains(t, r.Result.Error, "error asking the model about "+r.Result.Domain, "row %d: its own reason", r.Row)
			require.Contains(t, r.Result.Error, "503")
		}
	})
}
