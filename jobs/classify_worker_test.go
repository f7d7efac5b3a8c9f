package jobs_test

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
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
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

type testBundle struct {
	db      *db.DB
	llm     *llmtest.Server
	client  *jobs.Client
	webhook *webhookBundle
}

type setupOpts struct {
	noLLM bool
	// claimWait is the pipeline's ClaimWait (0: 10 s).
	claimWait time.Duration
	search    classifier.Searcher // search.None{} when nil
	settings  func(*jobs.Settings)
	webhook   *webhookOpts
}

func testSettings() jobs.Settings {
	s := jobs.DefaultSettings()
	// A job's timeout is a hang guard here, never a speed bar: a busy
	// machine gets the tests' whole patience.
	s.JobTimeout = dbtest.Patience()
	s.RescueStuckAfter = s.JobTimeout + time.Minute
	s.BusySnooze = time.Second
	return s
}

// newPipeline is the workers' pipeline on exec, against the fake model.
func newPipeline(t *testing.T, exec db.DBTX, model *llmtest.Server, opts setupOpts, settings jobs.Settings, logger *slog.Logger) *classifier.Pipeline {
	t.Helper()
	if opts.search == nil {
		opts.search = search.None{}
	}
	var completer classifier.Completer
	if !opts.noLLM {
		c, err := llm.New(llm.Config{BaseURL: model.BaseURL(), APIKey: "sk-test", Timeout: dbtest.Patience()})
		require.NoError(t, err)
		completer = llm.Limit(c, llm.DefaultMaxConcurrency, 60_000, nil)
	}
	return classifier.NewPipeline(classifier.PipelineConfig{
		Store: jobs.NewPipelineStore(exec), LLM: completer, Search: opts.search, Model: "test-model",
		Freshness: classifier.DefaultFreshness(), ClaimTTL: settings.ClaimTTL(), ClaimWait: cmp.Or(opts.claimWait, 10*time.Second),
		ClaimPoll: 20 * time.Millisecond, Logger: logger,
	})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// setup starts a River client with the workers on a schema of the test's
// own: for what needs River's whole machinery (retries, snoozes, rescues,
// several jobs at once).
func setup(t *testing.T, handle func(llmtest.Request) llmtest.Reply, opts setupOpts) *testBundle {
	t.Helper()
	ctx := context.Background()
	b := &testBundle{db: dbtest.New(t), llm: llmtest.New(t, handle)}
	settings := testSettings()
	if opts.settings != nil {
		opts.settings(&settings)
	}
	if opts.webhook != nil {
		testWebhookSettings(&settings)
		if opts.webhook.settings != nil {
			opts.webhook.settings(&settings)
		}
	}
	logger := testLogger(t)
	workers := river.NewWorkers()
	pipeline := newPipeline(t, b.db.Pool, b.llm, opts, settings, logger)
	cw := &jobs.ClassifyWorker{
		DB: b.db.Pool, Pipeline: pipeline, Registry: classifier.DefaultRegistry(), Settings: settings, Logger: logger,
	}
	river.AddWorker(workers, &jobs.ClassifyListWorker{
		DB: b.db.Pool, Pipeline: pipeline, Registry: classifier.DefaultRegistry(), Settings: settings, Logger: logger,
		Rows: jobs.NewRowStore(b.db.Pool, settings.StoreRetryFor(), nil, logger),
	})
	river.AddWorker(workers, &jobs.ListSweepWorker{DB: b.db.Pool, Settings: settings, Logger: logger})
	if opts.webhook != nil {
		b.webhook = opts.webhook.register(t, b, workers, settings, logger)
	}
	river.AddWorker(workers, cw)
	var err error
	b.client, err = jobs.NewClient(b.db.Pool, jobs.ClientConfig{
		Settings: settings, Logger: logger, Schema: b.db.Schema, Workers: workers, TestOnly: true,
	})
	require.NoError(t, err)
	require.NoError(t, b.client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), dbtest.Patience())
		defer cancel()
		_ = b.client.Stop(stopCtx)
	})
	return b
}

// accept writes a job as the API does (jobs.AcceptJob), in the caller's
// transaction, and returns its id and River job.
func accept(t *testing.T, tx pgx.Tx, ins *jobs.Client, callbackURL string, domains ...string) (uuid.UUID, *rivertype.JobRow) {
	t.Helper()
	inputs, bad := classifier.NormalizeDomains(domains)
	require.Empty(t, bad)
	return acceptJob(t, tx, ins, db.JobInsertParams{Caller: "test", Classifier: "cpg", Domains: inputs, CallbackURL: callbackURL})
}

// acceptJob is accept for the job p (its id is made here).
func acceptJob(t *testing.T, tx pgx.Tx, ins *jobs.Client, p db.JobInsertParams) (uuid.UUID, *rivertype.JobRow) {
	t.Helper()
	ctx := context.Background()
	p.ID = uuid.New()
	require.NoError(t, jobs.AcceptJob(ctx, tx, ins, p, nil))
	job, err := db.JobGet(ctx, tx, p.ID)
	require.NoError(t, err)
	row, err := ins.JobGetTx(ctx, tx, job.RiverJobID)
	require.NoError(t, err)
	return p.ID, row
}

// submit accepts a job and commits it, so that the client's workers see it.
func (b *testBundle) submit(t *testing.T, domains ...string) uuid.UUID {
	return b.submitWithCallback(t, "", domains...)
}

func (b *testBundle) submitWithCallback(t *testing.T, callbackURL string, domains ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer db.Rollback(ctx, tx)
	id, _ := accept(t, tx, b.client, callbackURL, domains...)
	require.NoError(t, tx.Commit(ctx))
	return id
}

func (b *testBundle) job(t *testing.T, id uuid.UUID) *classifier.Job {
	t.Helper()
	job, err := db.JobGet(context.Background(), b.db.Pool, id)
	require.NoError(t, err)
	return job
}

// waitJob polls until the job reaches status, or fails the test.
func (b *testBundle) waitJob(t *testing.T, id uuid.UUID, status classifier.Status) *classifier.Job {
	t.Helper()
	var job *classifier.Job
	require.Eventually(t, func() bool {
		job = b.job(t, id)
		return job.Status == status
	}, dbtest.Patience(), 20*time.Millisecond, "job %s never reached %s", id, status)
	return job
}

func (b *testBundle) riverJob(t *testing.T, job *classifier.Job) *rivertype.JobRow {
	t.Helper()
	row, err := b.client.JobGet(context.Background(), job.RiverJobID)
	require.NoError(t, err)
	return row
}

// setOverride sets an override of domain for cpg, as `override set` does,
// and returns it as stored.
func setOverride(t *testing.T, exec db.DBTX, domain string, answer bool, confidence int, by, note string) classifier.Override {
	t.Helper()
	ctx := context.Background()
	_, _, err := db.OverrideSet(ctx, exec, []classifier.Override{{Classifier: "cpg", Domain: domain, Answer: answer,
		Confidence: confidence, Note: note, SetBy: by}})
	require.NoError(t, err)
	o, err := db.OverrideGet(ctx, exec, "cpg", domain)
	require.NoError(t, err)
	return o
}

func resultOf(job *classifier.Job, domain string) classifier.Result {
	for _, d := range job.Domains {
		if d.Result.Domain == domain {
			return d.Result
		}
	}
	return classifier.Result{}
}

func byDomain(answers map[string]llmtest.Reply) func(llmtest.Request) llmtest.Reply {
	return func(r llmtest.Request) llmtest.Reply {
		if a, ok := answers[r.Domain]; ok {
			return a
		}
		return llmtest.Answer(true, 4, "Sells packaged goods.")
	}
}

func output(t *testing.T, row *rivertype.JobRow) jobs.ClassifyOutput {
	t.Helper()
	var out jobs.ClassifyOutput
	require.NoError(t, json.Unmarshal(row.Output(), &out), "output: %s", row.Output())
	return out
}

// txBundle works one job at a time inside a test transaction with River's
// test worker: the real insert and work path, rolled back at the end.
type txBundle struct {
	tx     pgx.Tx
	llm    *llmtest.Server
	client *jobs.Client // pool-less, for inserts into tx
	worker *rivertest.Worker[jobs.ClassifyArgs, pgx.Tx]
}

func setupTx(t *testing.T, handle func(llmtest.Request) llmtest.Reply, opts setupOpts) *txBundle {
	t.Helper()
	b := &txBundle{tx: dbtest.TestTx(t), llm: llmtest.New(t, handle)}
	settings := testSettings()
	settings.DomainConcurrency = 1 // a transaction is one connection
	logger := testLogger(t)
	driver := riverpgxv5.New(nil)
	var err error
	b.client, err = river.NewClient(driver, &river.Config{})
	require.NoError(t, err)
	b.worker = rivertest.NewWorker(t, driver, &river.Config{Logger: logger}, &jobs.ClassifyWorker{
		DB: b.tx, Pipeline: newPipeline(t, b.tx, b.llm, opts, settings, logger),
		Registry: classifier.DefaultRegistry(), Settings: settings, Logger: logger,
	})
	return b
}

// work accepts a job of domains and works it once.
func (b *txBundle) work(t *testing.T, callbackURL string, domains ...string) (*classifier.Job, *rivertest.WorkResult) {
	t.Helper()
	ctx := context.Background()
	id, row := accept(t, b.tx, b.client, callbackURL, domains...)
	res, err := b.worker.WorkJob(ctx, t, b.tx, row)
	require.NoError(t, err)
	job, err := db.JobGet(ctx, b.tx, id)
	require.NoError(t, err)
	return job, res
}

func TestClassifyWorker_Work(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswersFromTheModelAndStoresResults", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(map[string]llmtest.Reply{
			"acme.com":   llmtest.Answer(true, 5, "Makes chips."),
			"crm.io":     llmtest.Answer(false, 4, "Sells software."),
			"maybe.shop": llmtest.Answer(true, 2, "Possibly a DTC brand."),
		}), setupOpts{})
		job, res := b.work(t, "", "acme.com", "crm.io", "maybe.shop")
		require.Equal(t, classifier.StatusCompleted, job.Status)

		acme := resultOf(job, "acme.com")
		require.Equal(t, classifier.StatusCompleted, acme.Status)
		require.True(t, acme.Answer)
		require.Equal(t, 5, acme.Confidence)
		require.Equal(t, "Makes chips.", acme.Reasoning)
		require.Equal(t, classifier.SourceLLM, acme.Source)
		require.False(t, resultOf(job, "crm.io").Answer)
		require.Equal(t, 2, resultOf(job, "maybe.shop").Confidence)
		require.NotNil(t, job.CompletedAt)

		shared, err := db.ResultGet(ctx, b.tx, "cpg", "crm.io")
		require.NoError(t, err)
		require.Equal(t, "Sells software.", shared.Reasoning)
		require.Equal(t, "test-model", shared.Model)
		require.Equal(t, "v3", shared.PromptVersion, "the current prompt")

		require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
		require.Equal(t, jobs.ClassifyOutput{Domains: 3, Counts: jobs.Counts{LLM: 3}}, output(t, res.Job))
		rivertest.RequireNotInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.WebhookArgs{}, nil)
	})

	t.Run("CompletingQueuesTheWebhookInTheSameTransaction", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{})
		job, _ := b.work(t, "https://example.com/hooks", "acme.com")
		require.Equal(t, classifier.StatusCompleted, job.Status)
		hook := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.WebhookArgs{},
			&rivertest.RequireInsertedOpts{Queue: jobs.QueueWebhook, MaxAttempts: testSettings().WebhookMaxAttempts()})
		require.Equal(t, job.ID.String(), hook.Args.JobID)
		require.True(t, job.CompletedAt.Equal(hook.Args.EndedAt), "the delivery names this end")
	})

	t.Run("OverrideNeedsNoModel", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{})
		o := setOverride(t, b.tx, "unilever.com", false, 4, "alice", "Sells only the parent's stationery.")
		job, res := b.work(t, "", "www.unilever.com")
		r := resultOf(job, "unilever.com")
		require.Equal(t, classifier.SourceOverride, r.Source)
		require.False(t, r.Answer)
		require.Equal(t, 4, r.Confidence)
		require.Equal(t, "Set by alice: Sells only the parent's stationery.", r.Reasoning)
		require.Equal(t, []string{"alice", "Sells only the parent's stationery."}, []string{r.SetBy, r.Note}, "who and why reach the job's row")
		require.Equal(t, o.ProvenanceID, r.ProvenanceID)
		require.True(t, o.SetAt.Equal(r.ClassifiedAt), "an override's answer was made when it was set")
		require.Empty(t, r.Model)
		require.Zero(t, b.llm.Total())
		require.Equal(t, jobs.Counts{Override: 1}, output(t, res.Job).Counts)
	})

	t.Run("OverrideBeatsACachedAnswer", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(map[string]llmtest.Reply{"acme.com": llmtest.Answer(true, 5, "Makes chips.")}), setupOpts{})
		first, _ := b.work(t, "", "acme.com")
		require.Equal(t, classifier.SourceLLM, resultOf(first, "acme.com").Source)
		setOverride(t, b.tx, "acme.com", false, 5, "bob", "Sold its snack brands; now a software firm.")

		second, _ := b.work(t, "", "acme.com")
		got := resultOf(second, "acme.com")
		require.Equal(t, classifier.SourceOverride, got.Source, "the override wins over a fresh cached answer")
		require.False(t, got.Answer)
		require.Equal(t, "Makes chips.", resultOf(first, "acme.com").Reasoning, "the earlier job keeps what it got")
		cached, err := db.ResultGet(ctx, b.tx, "cpg", "acme.com")
		require.NoError(t, err)
		require.True(t, cached.Answer, "the model's answer is kept apart, not replaced")

		require.NoError(t, db.OverrideDelete(ctx, b.tx, "cpg", "acme.com"))
		third, _ := b.work(t, "", "acme.com")
		require.Equal(t, classifier.SourceCache, resultOf(third, "acme.com").Source, "deleted, the cache answers again")
		again, err := db.JobGet(ctx, b.tx, second.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"bob", "Sold its snack brands; now a software firm."},
			[]string{resultOf(again, "acme.com").SetBy, resultOf(again, "acme.com").Note}, "a row keeps the override it got")
		require.Equal(t, 1, b.llm.Calls("acme.com"))
	})

	t.Run("OverrideWinsOverRefresh", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{})
		setOverride(t, b.tx, "acme.com", true, 5, "carol", "Makes chips.")
		id, riverJob := acceptJob(t, b.tx, b.client, db.JobInsertParams{Caller: "test", Classifier: "cpg",
			Domains: []classifier.DomainInput{{Input: "acme.com", Domain: "acme.com"}},
			Want:    classifier.Want{Since: time.Now()}}) // "refresh": true
		_, err := b.worker.WorkJob(ctx, t, b.tx, riverJob)
		require.NoError(t, err)
		job, err := db.JobGet(ctx, b.tx, id)
		require.NoError(t, err)
		require.Equal(t, classifier.SourceOverride, resultOf(job, "acme.com").Source, "refresh asks the model again, not past an override")
		require.Zero(t, b.llm.Total())
	})

	t.Run("ResubmitIsServedFromCache", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{})
		first, _ := b.work(t, "", "acme.com")
		second, res := b.work(t, "", "https://www.acme.com/")
		require.Equal(t, classifier.SourceLLM, resultOf(first, "acme.com").Source)
		cached := resultOf(second, "acme.com")
		require.Equal(t, classifier.SourceCache, cached.Source)
		require.Equal(t, resultOf(first, "acme.com").Reasoning, cached.Reasoning)
		require.Equal(t, 1, b.llm.Calls("acme.com"))
		require.Equal(t, jobs.ClassifyOutput{Domains: 1, Counts: jobs.Counts{Cache: 1}}, output(t, res.Job))
	})

	t.Run("LowConfidenceAndFailedAreAskedAgain", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(map[string]llmtest.Reply{
			"low.com": llmtest.Answer(true, 1, "No idea."),
			"bad.com": {Content: "I would say yes."},
		}), setupOpts{})
		first, _ := b.work(t, "", "low.com", "bad.com")
		require.Equal(t, classifier.StatusFailed, resultOf(first, "bad.com").Status)
		b.work(t, "", "low.com", "bad.com")
		require.Equal(t, 2, b.llm.Calls("low.com"))
		require.Equal(t, 2, b.llm.Calls("bad.com"))
	})

	t.Run("UnreadableOutputFailsOnlyThatDomain", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(map[string]llmtest.Reply{
			"vague.com": {Content: `{"is_cpg": "maybe", "confidence": 3, "reasoning": "Unclear."}`},
		}), setupOpts{})
		job, res := b.work(t, "", "vague.com", "fine.com")
		require.Equal(t, classifier.StatusCompleted, job.Status)
		vague := resultOf(job, "vague.com")
		require.Equal(t, classifier.StatusFailed, vague.Status)
		require.Equal(t, classifier.SourceLLM, vague.Source)
		require.Equal(t, `unreadable model output: is_cpg is not a clear yes or no: "maybe"`, vague.Error)
		require.Equal(t, classifier.StatusCompleted, resultOf(job, "fine.com").Status)
		require.Equal(t, jobs.ClassifyOutput{Domains: 2, Counts: jobs.Counts{LLM: 1, Failed: 1}}, output(t, res.Job))

		_, err := db.ResultGet(ctx, b.tx, "cpg", "vague.com")
		require.ErrorIs(t, err, db.ErrNotFound, "a FAILED answer never counts as cached")
	})

	t.Run("UnknownJobIsCancelledAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{})
		res, err := b.worker.Work(ctx, t, b.tx, jobs.ClassifyArgs{JobID: uuid.NewString()}, nil)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateCancelled, res.Job.State)
		require.Equal(t, 1, res.Job.Attempt, "cancelled on the first attempt, no retry loop")
	})

	t.Run("WithoutAnLLMOverriddenAndCachedAreAnsweredOthersFail", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, byDomain(nil), setupOpts{noLLM: true})
		setOverride(t, b.tx, "known.com", true, 5, "test", "Known Co makes soap.")
		seed, _ := accept(t, b.tx, b.client, "", "cached.com")
		require.NoError(t, db.JobDomainFinish(ctx, b.tx, seed, 0, classifier.Result{
			Domain: "cached.com", Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true,
			Confidence: 4, Reasoning: "Soap.", Source: classifier.SourceLLM, ClassifiedAt: time.Now(),
		}, "seed"))

		job, _ := b.work(t, "", "known.com", "cached.com", "new.com")
		require.Equal(t, classifier.StatusCompleted, job.Status)
		require.Equal(t, classifier.SourceOverride, resultOf(job, "known.com").Source)
		require.Equal(t, classifier.SourceCache, resultOf(job, "cached.com").Source)
		require.Equal(t, "Soap.", resultOf(job, "cached.com").Reasoning)
		require.Equal(t, classifier.StatusFailed, resultOf(job, "new.com").Status)
		require.Equal(t, "no LLM configured", resultOf(job, "new.com").Error)
		require.Zero(t, b.llm.Total())
	})
}

// TestClassifyWorker_WithRiver runs the workers in a started River client:
// retries, snoozes, cancels and jobs running side by side.
func TestClassifyWorker_WithRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RedeliveredJobSkipsFinalDomains", func(t *testing.T) {
		t.Parallel()
		// flaky.com fails all the tries of the first run (DomainAttempts).
		attempts := jobs.DefaultSettings().DomainAttempts
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == "flaky.com" && r.Call <= attempts {
				return llmtest.Status(http.StatusInternalServerError, nil)
			}
			return llmtest.Answer(true, 4, "Packaged food.")
		}, setupOpts{settings: fastDomainRetries})
		job := b.waitJob(t, b.submit(t, "steady.com", "flaky.com"), classifier.StatusCompleted)
		require.Equal(t, 1, b.llm.Calls("steady.com"), "the retry must not pay again for a finished domain")
		require.Equal(t, attempts+1, b.llm.Calls("flaky.com"))
		row := b.riverJob(t, job)
		require.Equal(t, 2, row.Attempt)
		require.Len(t, row.Errors, 1)
		require.Equal(t, jobs.ClassifyOutput{Domains: 2, AlreadyFinal: 1, Counts: jobs.Counts{LLM: 1}}, output(t, row))
	})

	t.Run("ConcurrentJobsSharingADomainPayOnce", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 5, "Beverages.")
			if r.Domain == "shared.com" {
				a.Wait = release
			}
			return a
		}, setupOpts{})
		first := b.submit(t, "shared.com", "one.com")
		second := b.submit(t, "two.com", "shared.com")
		// Hold the model until both jobs are running, so both want shared.com.
		require.Eventually(t, func() bool {
			return b.job(t, first).Status == classifier.StatusRunning && b.job(t, second).Status == classifier.StatusRunning &&
				b.llm.Calls("shared.com") == 1
		}, dbtest.Patience(), 10*time.Millisecond)
		close(release)
		j1 := b.waitJob(t, first, classifier.StatusCompleted)
		j2 := b.waitJob(t, second, classifier.StatusCompleted)
		require.Equal(t, 1, b.llm.Calls("shared.com"))
		sources := []classifier.Source{resultOf(j1, "shared.com").Source, resultOf(j2, "shared.com").Source}
		require.ElementsMatch(t, []classifier.Source{classifier.SourceLLM, classifier.SourceCache}, sources)
	})

	t.Run("ThrottledJobSnoozesWithoutUsingAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			if r.Call == 1 {
				return llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"})
			}
			return llmtest.Answer(true, 5, "Snacks.")
		}, setupOpts{})
		job := b.waitJob(t, b.submit(t, "acme.com"), classifier.StatusCompleted)
		require.Equal(t, classifier.StatusCompleted, resultOf(job, "acme.com").Status)
		row := b.riverJob(t, job)
		require.Equal(t, 1, row.Attempt, "a 429 must not use up an attempt")
		require.Empty(t, row.Errors)
		var meta struct {
			Snoozes int `json:"snoozes"`
		}
		require.NoError(t, json.Unmarshal(row.Metadata, &meta))
		require.Equal(t, 1, meta.Snoozes)
		require.Equal(t, 2, b.llm.Calls("acme.com"))
	})

	t.Run("AttemptsExhaustedMarksJobFailed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusServiceUnavailable, nil) },
			setupOpts{settings: func(s *jobs.Settings) { s.MaxAttempts = 2; fastDomainRetries(s) }})
		job := b.waitJob(t, b.submit(t, "acme.com"), classifier.StatusFailed)
		require.Contains(t, job.Error, "gave up after 2 attempts")
		require.Contains(t, job.Error, "503 Service Unavailable")
		require.NotNil(t, job.CompletedAt)
		require.Eventually(t, func() bool { return b.riverJob(t, job).State == rivertype.JobStateDiscarded },
			dbtest.Patience(), 20*time.Millisecond)
		require.Equal(t, classifier.StatusPending, resultOf(job, "acme.com").Status)
	})

	t.Run("MalformedArgsAreCancelledAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, byDomain(nil), setupOpts{})
		for _, args := range []river.JobArgs{malformedArgs{JobID: 42}, jobs.ClassifyArgs{JobID: "not-a-uuid"}} {
			res, err := b.client.Insert(ctx, args, &river.InsertOpts{Queue: jobs.QueueClassify})
			require.NoError(t, err)
			requireCancelled(t, b, res.Job.ID)
		}
	})

	t.Run("NoTransactionIsHeldAcrossTheModelCall", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		b := setup(t, func(llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 5, "x")
			a.Wait = release
			return a
		}, setupOpts{})
		id := b.submit(t, "a.com", "b.com", "c.com")
		require.Eventually(t, func() bool { return b.llm.Total() == 3 }, dbtest.Patience(), 10*time.Millisecond)
		var inTx int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, b.db.Schema).Scan(&inTx))
		close(release)
		b.waitJob(t, id, classifier.StatusCompleted)
		require.Zero(t, inTx, "a transaction was open while the model was thinking")
	})
}

type malformedArgs struct {
	JobID int `json:"job_id"`
}

func (malformedArgs) Kind() string { return "classify" }

func requireCancelled(t *testing.T, b *testBundle, riverJobID int64) {
	t.Helper()
	var row *rivertype.JobRow
	require.Eventually(t, func() bool {
		var err error
		row, err = b.client.JobGet(context.Background(), riverJobID)
		require.NoError(t, err)
		return row.State == rivertype.JobStateCancelled
	}, dbtest.Patience(), 20*time.Millisecond)
	require.Equal(t, 1, row.Attempt, "cancelled on the first attempt, no retry loop")
}
