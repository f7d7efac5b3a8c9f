package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
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

// The tests of issue 27: a list survives a bad hour. A chunk that cannot be
// answered fails only its own rows, each with its own reason; handing work
// to the next chunk never depends on the chunk's own fate; a list is never
// left running with nothing queued.

// listBundle is a started River client with lists of 4-row chunks, 2 in
// flight.
func setupRecovery(t *testing.T, handle func(llmtest.Request) llmtest.Reply, s func(*jobs.Settings)) *testBundle {
	t.Helper()
	return setup(t, handle, setupOpts{settings: func(st *jobs.Settings) {
		st.ListChunkRows, st.ListChunksInFlight = 4, 2
		fastDomainRetries(st)
		if s != nil {
			s(st)
		}
	}})
}

// submitRecoveryList accepts a list as the API does (4-row chunks, 2 in
// flight) and commits it.
func submitRecoveryList(t *testing.T, b *testBundle, inputs ...string) *classifier.List {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, tx)
	s := testSettings()
	s.ListChunkRows, s.ListChunksInFlight = 4, 2
	l := acceptList(t, tx, b.client, s, "", inputs...)
	require.NoError(t, tx.Commit(ctx))
	return l
}

func waitListStatus(t *testing.T, b *testBundle, id uuid.UUID, status classifier.Status) *classifier.List {
	t.Helper()
	var l *classifier.List
	ok := assertEventually(dbtest.Patience(), func() bool {
		var err error
		l, err = db.ListGet(context.Background(), b.db.Pool, id)
		require.NoError(t, err)
		return l.Status == status
	})
	require.True(t, ok, "list is %s (%s), never reached %s: done %d of %d", l.Status, l.Error, status, l.Done, l.Rows)
	return l
}

// assertEventually polls cond every 20 ms until it holds or within passes.
func assertEventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// injectFault makes the statements of the test's schema fail: a trigger on
// table raises "injected fault" for the first n rows that match when (an
// SQL condition on NEW), counted by a sequence so that the count survives
// the rollback of the failed statement. It is dropped when the test ends
// (schemas are reused).
func injectFault(t *testing.T, b *testBundle, table, when string, n int) {
	t.Helper()
	ctx := context.Background()
	name := "fault_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	_, err := b.db.Pool.Exec(ctx, fmt.Sprintf(`
		CREATE SEQUENCE %[1]s;
		CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (%[2]s) AND nextval('%[1]s') <= %[3]d THEN
				RAISE EXCEPTION 'injected fault on %[4]s';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER %[1]s BEFORE INSERT OR UPDATE ON %[4]s FOR EACH ROW EXECUTE FUNCTION %[1]s();`,
		name, when, n, table))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := b.db.Pool.Exec(context.Background(), fmt.Sprintf(
			`DROP TRIGGER %[1]s ON %[2]s; DROP FUNCTION %[1]s(); DROP SEQUENCE %[1]s;`, name, table))
		require.NoError(t, err)
	})
}

func TestListRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AChunkOutOfAttemptsFailsOnlyItsOwnRowsAndTheListGoesOn", func(t *testing.T) {
		t.Parallel()
		// Chunk 1 (rows 5-8) holds the two domains the model never answers.
		b := setupRecovery(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == "e.com" || r.Domain == "f.com" {
				return llmtest.Status(http.StatusServiceUnavailable, nil)
			}
			return llmtest.Answer(true, 4, "Packaged food.")
		}, func(s *jobs.Settings) { s.MaxAttempts = 1 })
		l := submitRecoveryList(t, b, "a.com", "b.com", "c.com", "d.com", "e.com", "f.com", "g.com", "h.com",
			"i.com", "j.com", "k.com", "l.com", "e.com")
		done := waitListStatus(t, b, l.ID, classifier.StatusCompleted)
		require.Empty(t, done.Error, "a list ends COMPLETED when every row is final, some FAILED")
		require.Equal(t, []int{13, 10, 3}, []int{done.Done, done.Completed, done.Failed})
		rows := listRows(t, b.db.Pool, done)
		for _, r := range rows {
			switch r.Result.Domain {
			case "e.com", "f.com":
				require.Equal(t, classifier.StatusFailed, r.Result.Status, "row %d", r.Row)
				require.Contains(t, r.Result.Error, r.Result.Domain, "row %d: its own reason names its own domain", r.Row)
				require.Contains(t, r.Result.Error, "503")
			default:
				require.Equal(t, classifier.StatusCompleted, r.Result.Status, "row %d (%s): %s", r.Row, r.Result.Domain, r.Result.Error)
			}
		}
	})

	t.Run("AChunkThatCannotQueueTheNextStillFinishesItsRows", func(t *testing.T) {
		t.Parallel()
		b := setupRecovery(t, byDomain(nil), func(s *jobs.Settings) { s.MaxAttempts = 1 })
		// Queueing chunk 1 fails twice: as chunk 0 starts, and once all its
		// domains have.
		injectFault(t, b, "river_job", `NEW.kind = 'classify_list' AND NEW.args->>'chunk' = '1'`, 2)
		l := submitRecoveryList(t, b, "a.com", "b.com", "c.com", "d.com", "e.com", "f.com")
		done := waitListStatus(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, 6, done.Completed)
		res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds(jobs.ClassifyListArgs{}.Kind()).
			States(rivertype.JobStateCompleted, rivertype.JobStateDiscarded, rivertype.JobStateRetryable))
		require.NoError(t, err)
		require.Len(t, res.Jobs, 2)
		for _, j := range res.Jobs {
			require.Equal(t, rivertype.JobStateCompleted, j.State)
			require.Empty(t, j.Errors, "a failed hand-over costs the chunk no attempt")
		}
	})
}

// TestListWindow: a list's chunks that fail and wait for River's retry
// keep their place in its window, so that a list whose every call fails
// does not queue chunk after chunk to fail in turn (issue 27: 530 chunk
// jobs unfinished where operating.md says about 8).
func TestListWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusServiceUnavailable, nil) },
		setupOpts{settings: func(s *jobs.Settings) {
			s.ListChunkRows, s.ListChunksInFlight, s.MaxAttempts, s.DomainAttempts = 2, 2, 5, 1
		}})
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, tx)
	var inputs []string
	for i := range 20 {
		inputs = append(inputs, fmt.Sprintf("down%02d.com", i))
	}
	l := acceptList(t, tx, b.client, listSettings(2, 2), "", inputs...)
	require.NoError(t, tx.Commit(ctx))

	// Chunk 0's first retry comes a second after it failed: by then a list
	// without the bound had queued and failed every one of its 10 chunks.
	chunks := func(states ...rivertype.JobState) []*rivertype.JobRow {
		res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds(jobs.ClassifyListArgs{}.Kind()).States(states...).First(100))
		require.NoError(t, err)
		return res.Jobs
	}
	require.True(t, assertEventually(dbtest.Patience(), func() bool {
		for _, j := range chunks(rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable,
			rivertype.JobStateScheduled) {
			var a jobs.ClassifyListArgs
			require.NoError(t, json.Unmarshal(j.EncodedArgs, &a))
			if a.Chunk == 0 && j.Attempt >= 2 {
				return true
			}
		}
		return false
	}), "chunk 0 was not retried")
	all := chunks(rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable,
		rivertype.JobStateScheduled, rivertype.JobStateCompleted, rivertype.JobStateDiscarded)
	require.LessOrEqual(t, len(all), 3, "the window (2, and one more while a chunk's last domains run) holds the failing chunks")
	now, err := db.ListGet(ctx, b.db.Pool, l.ID)
	require.NoError(t, err)
	require.Zero(t, now.Done)
}

// sweep runs one list sweep, as River's leader does every
// ListSweepInterval, and waits for it to end.
func sweep(t *testing.T, b *testBundle) jobs.ListSweepOutput {
	t.Helper()
	ctx := context.Background()
	res, err := b.client.Insert(ctx, jobs.ListSweepArgs{}, nil)
	require.NoError(t, err)
	var row *rivertype.JobRow
	require.True(t, assertEventually(dbtest.Patience(), func() bool {
		row, err = b.client.JobGet(ctx, res.Job.ID)
		require.NoError(t, err)
		return row.State == rivertype.JobStateCompleted
	}), "the sweep did not complete: %s %v", row.State, row.Errors)
	var out jobs.ListSweepOutput
	require.NoError(t, json.Unmarshal(row.Output(), &out))
	return out
}

func TestListSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AListLeftWithNothingQueuedIsSweptOn", func(t *testing.T) {
		t.Parallel()
		b := setupRecovery(t, byDomain(nil), nil)
		// Queueing chunk 1 fails each time chunk 0 tries: as it starts, once
		// all its domains have, and as it ends. Chunk 0 still ends.
		injectFault(t, b, "river_job", `NEW.kind = 'classify_list' AND NEW.args->>'chunk' = '1'`, 3)
		l := submitRecoveryList(t, b, "a.com", "b.com", "c.com", "d.com", "e.com", "f.com")
		require.True(t, assertEventually(dbtest.Patience(), func() bool {
			now, err := db.ListGet(ctx, b.db.Pool, l.ID)
			require.NoError(t, err)
			return now.Completed == 4
		}), "chunk 0 did not finish its rows")
		// Chunk 0's job completes after its rows are stored: wait for it.
		require.True(t, assertEventually(dbtest.Patience(), func() bool {
			res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds(jobs.ClassifyListArgs{}.Kind()).
				States(rivertype.JobStateCompleted))
			require.NoError(t, err)
			return len(res.Jobs) == 1
		}))
		now, err := db.ListGet(ctx, b.db.Pool, l.ID)
		require.NoError(t, err)
		require.Equal(t, classifier.StatusRunning, now.Status, "running, with nothing queued")

		out := sweep(t, b)
		require.Equal(t, jobs.ListSweepOutput{Stalled: 1, Fed: 1}, out)
		done := waitListStatus(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, 6, done.Completed)
		require.Equal(t, jobs.ListSweepOutput{}, sweep(t, b), "nothing is stalled any more")
	})

	t.Run("AChunkCancelledInRiverHasItsOwnRowsFailedAndTheListGoesOn", func(t *testing.T) {
		t.Parallel()
		b := setupRecovery(t, byDomain(nil), nil)
		// The upload's first chunk, cancelled by an operator in River UI
		// before it ran: nothing will ever queue the next.
		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		defer db.Rollback(ctx, tx)
		s := testSettings()
		s.ListChunkRows, s.ListChunksInFlight = 4, 2
		l := acceptList(t, tx, b.client, s, "", "a.com", "b.com", "c.com", "d.com", "e.com", "f.com", "a.com")
		_, err = tx.Exec(ctx, `UPDATE river_job SET scheduled_at = now() + interval '1 hour', state = 'scheduled' WHERE kind = 'classify_list'`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds(jobs.ClassifyListArgs{}.Kind()).States(rivertype.JobStateScheduled))
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1)
		_, err = b.client.JobCancel(ctx, res.Jobs[0].ID)
		require.NoError(t, err)

		out := sweep(t, b)
		require.Equal(t, jobs.ListSweepOutput{Stalled: 1, RowsFailed: 5, Fed: 1}, out, "chunk 0's 4 rows and the duplicate of row 1")
		done := waitListStatus(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, []int{7, 2, 5}, []int{done.Done, done.Completed, done.Failed})
		for _, r := range listRows(t, b.db.Pool, done) {
			if r.Row <= 4 || r.Row == 7 {
				require.Equal(t, classifier.StatusFailed, r.Result.Status, "row %d", r.Row)
				require.Equal(t, "not answered: chunk 0's job was cancelled before it ran", r.Result.Error, "row %d", r.Row)
			} else {
				require.Equal(t, classifier.StatusCompleted, r.Result.Status, "row %d", r.Row)
			}
		}
	})
}

// TestDomainRetries: one domain's transient failure is retried on its own,
// in the job, before the job goes back to River.
func TestDomainRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ATransientModelErrorIsRetriedInTheJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == "flaky.com" && r.Call == 1 {
				return llmtest.Status(http.StatusInternalServerError, nil)
			}
			return llmtest.Answer(true, 4, "Packaged food.")
		}, setupOpts{settings: fastDomainRetries})
		domains := []string{"flaky.com", "a.com", "b.com", "c.com", "d.com", "e.com", "f.com", "g.com", "h.com", "i.com"}
		job := b.waitJob(t, b.submit(t, domains...), classifier.StatusCompleted)
		row := b.riverJob(t, job)
		require.Equal(t, 1, row.Attempt, "one bad domain does not send the job back to River")
		require.Empty(t, row.Errors)
		require.Equal(t, 2, b.llm.Calls("flaky.com"))
		for _, d := range domains[1:] {
			require.Equal(t, 1, b.llm.Calls(d), d)
		}
		require.Equal(t, classifier.StatusCompleted, resultOf(job, "flaky.com").Status)
	})

	t.Run("AnAnswerWhoseStoreFailsIsStoredAgainNotAskedAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{settings: fastDomainRetries})
		injectFault(t, b, "classify_job_domain", `NEW.domain = 'paid.com'`, 2)
		job := b.waitJob(t, b.submit(t, "paid.com", "other.com"), classifier.StatusCompleted)
		require.Equal(t, 1, b.llm.Calls("paid.com"), "the answer that arrived is stored, not asked for again")
		require.Equal(t, classifier.StatusCompleted, resultOf(job, "paid.com").Status)
		require.Equal(t, 1, b.riverJob(t, job).Attempt)
		cached, err := db.ResultGet(ctx, b.db.Pool, "cpg", "paid.com")
		require.NoError(t, err)
		require.Equal(t, "test-model", cached.Model, "the shared answer and its provenance are stored with it")
	})

	t.Run("AListRowWhoseStoreFailsIsStoredAgainNotAskedAgain", func(t *testing.T) {
		t.Parallel()
		b := setupRecovery(t, byDomain(nil), nil)
		injectFault(t, b, "list_row", `NEW.domain = 'paid.com' AND NEW.status <> 'PENDING'`, 2)
		l := submitRecoveryList(t, b, "paid.com", "other.com", "paid.com")
		done := waitListStatus(t, b, l.ID, classifier.StatusCompleted)
		require.Equal(t, 3, done.Completed)
		require.Equal(t, 1, b.llm.Calls("paid.com"), "the answer that arrived is stored, not asked for again")
	})
}

// fastDomainRetries shortens the per-domain retries' backoff for tests.
func fastDomainRetries(s *jobs.Settings) { s.DomainRetryBackoff = 10 * time.Millisecond }

// TestLogs: a list's log at INFO is a line per chunk run, not per domain
// (issue 27: 62 MB of logs for 250k answers); the domains' lines are at
// DEBUG.
func TestLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			var buf lockedBuffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
			s := listSettings(20, 1)
			s.ListDomainConcurrency = 1
			b := setupTx(t, byDomain(nil), setupOpts{})
			w := rivertest.NewWorker(t, riverpgxv5.New(nil), &river.Config{Logger: logger}, &jobs.ClassifyListWorker{
				DB: b.tx, Pipeline: newPipeline(t, b.tx, b.llm, setupOpts{}, s, logger),
				Registry: classifier.DefaultRegistry(), Settings: s, Logger: logger,
			})
			var inputs []string
			for i := range 20 {
				inputs = append(inputs, fmt.Sprintf("brand%02d.com", i))
			}
			acceptList(t, b.tx, b.client, s, "", inputs...)
			job := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
			_, err := w.WorkJob(ctx, t, b.tx, job.JobRow)
			require.NoError(t, err)

			perDomain, summaries := 0, 0
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
				if _, ok := rec["domain"]; ok {
					perDomain++
				}
				if rec["msg"] == "list chunk run" {
					summaries++
					require.Equal(t, "INFO", rec["level"])
					require.EqualValues(t, 20, rec["llm"])
				}
			}
			require.Equal(t, 1, summaries, "one summary of the chunk's run")
			if level == slog.LevelInfo {
				require.Zero(t, perDomain, "no line per domain at INFO:\n%s", buf.String())
			} else {
				require.Equal(t, 20, perDomain, "a line per domain at DEBUG")
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer that goroutines may write at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestEconomyRetry: an economy list's rows queued again by a retry are
// answered by calls: the chunk's batch has ended, and a retry's chunk is a
// pass of its own.
func TestEconomyRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setupEconomy(t, func(r llmtest.Request) llmtest.Reply {
		if r.Domain == "refused.com" && r.Batch != "" {
			return llmtest.Reply{Content: "Sure!"} // unreadable in the batch: the row FAILS
		}
		return llmtest.Answer(true, 4, "Snacks.")
	}, nil)
	l := e.accept(t, "a.com", "refused.com")
	e.stage(t)
	e.follow(t)
	now, rows := e.list(t, l)
	require.Equal(t, classifier.StatusCompleted, now.Status)
	require.Equal(t, classifier.StatusFailed, rows[2].Result.Status)

	retried, err := db.ListRetryRows(ctx, e.tx, now)
	require.NoError(t, err)
	require.Equal(t, db.ListRetried{Rows: 1, Pass: 1}, retried)
	fed, err := jobs.FeedChunks(ctx, e.client, e.tx, l.ID, 1)
	require.NoError(t, err)
	require.Equal(t, 1, fed)
	jobsNow := rivertest.RequireManyInsertedTx[*riverpgxv5.Driver](ctx, t, e.tx, []rivertest.ExpectedJob{
		{Args: &jobs.ClassifyListArgs{}}, {Args: &jobs.BatchArgs{}}, {Args: &jobs.WebhookArgs{}}, {Args: &jobs.ClassifyListArgs{}}})
	res, err := e.chunks.WorkJob(ctx, t, e.tx, jobsNow[3])
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
	now, rows = e.list(t, l)
	require.Equal(t, classifier.StatusCompleted, now.Status)
	require.Equal(t, classifier.StatusCompleted, rows[2].Result.Status, "answered by a call")
	var calls int
	for _, r := range e.llm.Requests() {
		if r.Batch == "" {
			calls++
		}
	}
	require.Equal(t, 1, calls)
}

// TestListCannotGoOn: the one way a list ends FAILED is that the service
// cannot go on with it at all, and it says why: here its classifier is no
// longer configured.
func TestListCannotGoOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := listSettings(2, 1)
	b, w := setupListTx(t, byDomain(nil), s)
	l := acceptList(t, b.tx, b.client, s, "https://example.com/hooks", "a.com", "b.com", "c.com")
	_, err := b.tx.Exec(ctx, `UPDATE list SET classifier = 'b2b' WHERE id = $1`, l.ID)
	require.NoError(t, err)
	job := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
	res, err := w.WorkJob(ctx, t, b.tx, job.JobRow)
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateCancelled, res.Job.State, "no retry loop for what retrying cannot fix")
	now, err := db.ListGet(ctx, b.tx, l.ID)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusFailed, now.Status)
	require.Equal(t, `classifier "b2b" is not configured in this deployment`, now.Error)
	require.Zero(t, b.llm.Total())
	rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.WebhookArgs{}, &rivertest.RequireInsertedOpts{Queue: jobs.QueueWebhook})
}
