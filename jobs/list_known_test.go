package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// A list's answered rows answered as a set read exactly as the same rows
// answered a domain at a time by the pipeline (its override, then a cached
// answer fresh under the deployment's TTLs and the list's max_age), and
// count the same in the list's progress: the set is a faster way to the
// same answers, never other ones.
func TestListAnswerKnown_AnswersAsThePipelineDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := listSettings(4, 1)
	b, _ := setupListTx(t, nil, s)
	p := newPipeline(t, b.tx, b.llm, setupOpts{}, s, testLogger(t))
	now := time.Now()
	day := 24 * time.Hour

	_, _, err := db.OverrideSet(ctx, b.tx, []classifier.Override{
		{Classifier: "cpg", Domain: "unilever.com", Answer: true, Confidence: 5, Note: "Makes soap.", SetBy: "ops"},
		// An override wins over a fresh cached answer of the same domain.
		{Classifier: "cpg", Domain: "cached-too.com", Answer: false, Confidence: 4, Note: "A shop, not a maker.", SetBy: "ops"},
	})
	require.NoError(t, err)
	cache := func(domain string, answer bool, confidence int, age time.Duration, evidence ...string) {
		t.Helper()
		r := classifier.Result{Domain: domain, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: answer,
			Confidence: confidence, Reasoning: "Because " + domain + ".", Source: classifier.SourceLLM,
			ClassifiedAt: now.Add(-age), Model: "test-model", PromptVersion: "v7", Search: "test",
			Usage: &classifier.Usage{PromptTokens: 10, CompletionTokens: 5}}
		for _, e := range evidence {
			r.Evidence = append(r.Evidence, classifier.EvidenceItem{URL: e, Title: "T " + e})
		}
		// Stored as a model's answer is, through a list that is gone.
		_, err := db.ListRowFinish(ctx, b.tx, uuid.New(), 1, r, "seed")
		require.NoError(t, err)
	}
	cache("cached-too.com", true, 5, day)
	cache("fresh.com", true, 5, 2*day, "https://fresh.com/", "https://fresh.com/about?a=1")
	cache("no-evidence.com", false, 4, day)
	cache("medium.com", false, 3, 10*day, "https://medium.com/")
	cache("stale.com", true, 5, 61*day)        // past the 60-day TTL
	cache("low.com", true, 1, time.Hour)       // confidence 1 is never served again
	cache("old-for-list.com", true, 5, 20*day) // past the list's max_age

	inputs := []string{"unilever.com", "fresh.com", "new.com", "stale.com", "low.com", "medium.com", "cached-too.com",
		"old-for-list.com", "no-evidence.com", "www.fresh.com", "unilever.com", "bad input!", "medium.com"}
	want := classifier.Want{MaxAge: 15 * day}
	one := acceptTier(t, b.tx, b.client, s, &classifier.List{Want: want}, inputs...)
	set := acceptTier(t, b.tx, b.client, s, &classifier.List{Want: want}, inputs...)
	// And at the upload, as the API writes a list (db.ListRowsAccept).
	f, at := p.CacheRules()
	up := acceptAnswering(t, b.tx, b.client, s, &classifier.List{Want: want}, &jobs.AnswerRules{Freshness: f, Now: at}, inputs...)

	// A domain at a time, as the chunk did until now.
	pending, err := db.ListPending(ctx, b.tx, one.ID, 1, one.Rows)
	require.NoError(t, err)
	c, err := classifier.DefaultRegistry().Get("cpg")
	require.NoError(t, err)
	for _, r := range pending {
		a, err := p.Answered(ctx, c, r.Result.Domain, want)
		require.NoError(t, err)
		if a != nil {
			_, err = db.ListRowFinish(ctx, b.tx, one.ID, r.Row, *a, "one")
			require.NoError(t, err)
		}
	}

	// As a set, in two ranges as two chunks would.
	k1, err := db.ListAnswerKnown(ctx, b.tx, set.ID, "cpg", 1, 6, f, want, at)
	require.NoError(t, err)
	k2, err := db.ListAnswerKnown(ctx, b.tx, set.ID, "cpg", 7, set.Rows, f, want, at)
	require.NoError(t, err)
	again, err := db.ListAnswerKnown(ctx, b.tx, set.ID, "cpg", 1, set.Rows, f, want, at)
	require.NoError(t, err)
	require.Equal(t, db.Known{}, again, "a row answered already is left as it is")

	require.Equal(t, db.Known{Override: 1, Cache: 2, Rows: 3}, k1, "rows 1-6: unilever.com, fresh.com, medium.com")
	require.Equal(t, db.Known{Override: 1, Cache: 1, Rows: 5}, k2,
		"rows 7-13: cached-too.com by its override, no-evidence.com, and the duplicates of rows 1, 2 and 6")

	oneRows, setRows, upRows := listRows(t, b.tx, one), listRows(t, b.tx, set), listRows(t, b.tx, up)
	require.Len(t, setRows, len(inputs))
	require.Len(t, upRows, len(inputs))
	for row := 1; row <= len(inputs); row++ {
		require.Equal(t, oneRows[row], setRows[row], "row %d (%s)", row, inputs[row-1])
		require.Equal(t, oneRows[row], upRows[row], "row %d (%s) answered at the upload", row, inputs[row-1])
	}
	again, err = db.ListAnswerKnown(ctx, b.tx, up.ID, "cpg", 1, up.Rows, f, want, at)
	require.NoError(t, err)
	require.Equal(t, db.Known{}, again, "the upload answered every row a chunk would")
	var urls []string
	for _, e := range setRows[2].Result.Evidence {
		urls = append(urls, e.URL)
	}
	require.Equal(t, []string{"https://fresh.com/", "https://fresh.com/about?a=1"}, urls, "fresh.com's evidence, in order")
	require.Equal(t, classifier.StatusPending, setRows[4].Result.Status, "stale.com is asked again")

	oneList, err := db.ListGet(ctx, b.tx, one.ID)
	require.NoError(t, err)
	setList, err := db.ListGet(ctx, b.tx, set.ID)
	require.NoError(t, err)
	require.Equal(t, progress(oneList), progress(setList))
	require.Equal(t, "done 9, completed 8, override 3, cache 5", progress(setList))
	upList, err := db.ListGet(ctx, b.tx, up.ID)
	require.NoError(t, err)
	require.Equal(t, progress(setList), progress(upList), "the upload counts what it answered")
}

func progress(l *classifier.List) string {
	return fmt.Sprintf("done %d, completed %d, override %d, cache %d", l.Done, l.Completed, l.Override, l.Cache)
}

// A list whose domains are all answered already (a weekly re-upload) is
// answered by its first chunk as sets, queues no other chunk and ends
// COMPLETED, asking the model nothing.
func TestClassifyListWorker_AnsweredListEndsInItsFirstChunk(t *testing.T) {
	t.Parallel()
	s := listSettings(2, 2)
	b, w := setupListTx(t, nil, s)
	seedAnswered(t, b.tx)
	// Five chunks of two rows; row 7 repeats row 1, row 8 is rejected.
	l := acceptList(t, b.tx, b.client, s, "", "a.com", "unilever.com", "b.com", "www.c.com", "c.com", "b.com", "a.com", "bad input!")

	res, now := requireEndedByFirstChunk(t, b, w, l)
	require.Equal(t, "done 8, completed 7, override 1, cache 6", progress(now))
	var out jobs.ListChunkOutput
	require.NoError(t, json.Unmarshal(res.Job.Output(), &out))
	require.Equal(t, jobs.ListChunkOutput{ListID: l.ID.String(), Chunk: 0, Domains: 0, Counts: jobs.Counts{Override: 1, Cache: 3},
		ListDone: 8, ListRows: 8}, out)
}

// seedAnswered gives the lists of these tests their answers: an override
// of unilever.com and fresh cached answers of a.com, b.com and c.com.
func seedAnswered(t *testing.T, tx pgx.Tx) {
	t.Helper()
	_, _, err := db.OverrideSet(context.Background(), tx, []classifier.Override{{Classifier: "cpg", Domain: "unilever.com",
		Answer: true, Confidence: 5, Note: "Makes soap.", SetBy: "ops"}})
	require.NoError(t, err)
	seedCached(t, tx, "a.com", "b.com", "c.com")
}

// requireEndedByFirstChunk works list l's first chunk and requires that it
// completes, asks the model nothing, ends the list COMPLETED and queues no
// other chunk; it returns the chunk's result and the list after it.
func requireEndedByFirstChunk(t *testing.T, b *txBundle, w *rivertest.Worker[jobs.ClassifyListArgs, pgx.Tx], l *classifier.List) (*rivertest.WorkResult, *classifier.List) {
	t.Helper()
	ctx := context.Background()
	first := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
	res, err := w.WorkJob(ctx, t, b.tx, first.JobRow)
	require.NoError(t, err)
	require.Equal(t, rivertype.JobStateCompleted, res.Job.State)
	require.Zero(t, b.llm.Total())
	now, err := db.ListGet(ctx, b.tx, l.ID)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusCompleted, now.Status, "the first chunk ended the list")
	var chunks int
	require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'classify_list'`).Scan(&chunks))
	require.Equal(t, 1, chunks, "no other chunk was queued")
	return res, now
}

// A list re-uploaded whole (a weekly CRM export) is answered by its upload
// (db.ListRowsAccept); its first chunk finds nothing left, ends it and
// queues no other chunk, asking the model nothing.
func TestClassifyListWorker_ListAnsweredAtItsUploadEndsInItsFirstChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := listSettings(2, 2)
	b, w := setupListTx(t, nil, s)
	p := newPipeline(t, b.tx, b.llm, setupOpts{}, s, testLogger(t))
	seedAnswered(t, b.tx)
	f, at := p.CacheRules()
	l := acceptAnswering(t, b.tx, b.client, s, &classifier.List{}, &jobs.AnswerRules{Freshness: f, Now: at},
		"a.com", "unilever.com", "b.com", "www.c.com", "c.com", "b.com", "a.com", "bad input!")
	written, err := db.ListGet(ctx, b.tx, l.ID)
	require.NoError(t, err)
	require.Equal(t, "done 8, completed 7, override 1, cache 6", progress(written), "answered as the upload wrote it")

	_, now := requireEndedByFirstChunk(t, b, w, l)
	require.Equal(t, progress(written), progress(now), "nothing counted twice")
}

// The upload looks a list up only when its first domains say it is mostly
// answered (one in four, or more): a list mostly new to the service is
// written as it was, every valid row PENDING, and its chunks answer what
// they can from the cache first.
func TestAcceptList_LooksUpOnlyAListMostlyAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := listSettings(2, 2)
	b, _ := setupListTx(t, nil, s)
	p := newPipeline(t, b.tx, b.llm, setupOpts{}, s, testLogger(t))
	seedCached(t, b.tx, "a.com")
	f, at := p.CacheRules()
	status := func(inputs ...string) (string, classifier.Status) {
		l := acceptAnswering(t, b.tx, b.client, s, &classifier.List{}, &jobs.AnswerRules{Freshness: f, Now: at}, inputs...)
		got, err := db.ListGet(ctx, b.tx, l.ID)
		require.NoError(t, err)
		return progress(got), listRows(t, b.tx, l)[1].Result.Status
	}
	done, first := status("a.com", "n1.com", "n2.com", "n3.com", "n4.com")
	require.Equal(t, "done 0, completed 0, override 0, cache 0", done, "one in five answered: not looked up")
	require.Equal(t, classifier.StatusPending, first)
	done, first = status("a.com", "n1.com", "n2.com", "n3.com")
	require.Equal(t, "done 1, completed 1, override 0, cache 1", done, "one in four answered: looked up")
	require.Equal(t, classifier.StatusCompleted, first)
}

// An upload whose look-up cannot keep its answers (LIST_SPOOL_DIR gone or
// full) is refused whole: its transaction rolls back, no row is left.
func TestAcceptList_AnUploadThatCannotKeepItsAnswersWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := listSettings(2, 2)
	b, _ := setupListTx(t, nil, s)
	p := newPipeline(t, b.tx, b.llm, setupOpts{}, s, testLogger(t))
	seedCached(t, b.tx, "a.com")
	src := &rowSlice{}
	src.add(db.ListRowIn{Row: 1, Input: "a.com", Domain: "a.com"})
	src.add(db.ListRowIn{Row: 2, Input: "b.com", Domain: "b.com"})
	l := &classifier.List{ID: uuid.New(), Caller: "test", Classifier: "cpg", Rows: 2, Domains: 2}
	f, at := p.CacheRules()
	sp, err := b.tx.Begin(ctx) // the handler's transaction
	require.NoError(t, err)
	_, err = jobs.AcceptList(ctx, sp, b.client, s, jobs.ListAccept{List: l, Answer: &jobs.AnswerRules{
		Rows: func() (db.ListRowSource, error) { return src.reset(), nil }, Freshness: f, Now: at,
		Dir: filepath.Join(t.TempDir(), "gone")}})
	require.ErrorContains(t, err, "scratch file")
	require.NoError(t, sp.Rollback(ctx))
	require.Zero(t, count(t, b.tx, `SELECT count(*) FROM list_row WHERE list_id = $1`, l.ID))
	_, err = db.ListGet(ctx, b.tx, l.ID)
	require.ErrorIs(t, err, db.ErrNotFound)
}

// seedCached stores a fresh model answer (no, confidence 4) for each
// domain, as a list that is gone answered it.
func seedCached(t *testing.T, tx pgx.Tx, domains ...string) {
	t.Helper()
	for _, d := range domains {
		_, err := db.ListRowFinish(context.Background(), tx, uuid.New(), 1, classifier.Result{Domain: d, Classifier: "cpg",
			Status: classifier.StatusCompleted, Answer: false, Confidence: 4, Reasoning: "Software.", Source: classifier.SourceLLM,
			ClassifiedAt: time.Now(), Model: "m", PromptVersion: "v1"}, "seed")
		require.NoError(t, err)
	}
}
