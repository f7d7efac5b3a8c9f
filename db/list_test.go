package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// rows yields n list rows; every tenth is a duplicate of the row five
// before it.
type rows struct {
	n, i int
}

func (r *rows) Next() bool { r.i++; return r.i <= r.n }
func (r *rows) Err() error { return nil }
func (r *rows) Row() db.ListRowIn {
	if r.i%10 == 0 {
		return db.ListRowIn{Row: r.i, Input: fmt.Sprintf("d%d.com", r.i-5), Domain: fmt.Sprintf("d%d.com", r.i-5), FirstRow: r.i - 5}
	}
	return db.ListRowIn{Row: r.i, Input: fmt.Sprintf("d%d.com", r.i), Domain: fmt.Sprintf("d%d.com", r.i)}
}

// tuplesRead is how many list_row tuples tx has read so far, by any scan
// of the table or of its indexes.
func tuplesRead(t *testing.T, tx db.DBTX) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT sum(pg_stat_get_xact_tuples_returned(oid) + pg_stat_get_xact_tuples_fetched(oid))::bigint
		FROM pg_class
		WHERE oid = 'list_row'::regclass OR oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'list_row'::regclass)`).Scan(&n))
	return n
}

// uploadRows writes a list of n rows (every tenth a duplicate of the row
// n/2 before it, as rows makes them) in tx, as an upload does.
func uploadRows(t *testing.T, tx db.DBTX, n int) *classifier.List {
	t.Helper()
	ctx := context.Background()
	l := &classifier.List{ID: uuid.New(), Caller: "a", Classifier: "cpg", Rows: n, Domains: n - n/10, Duplicates: n / 10,
		ChunkRows: 200, Chunks: max(n/200, 1), Retention: time.Hour}
	require.NoError(t, db.ListInsert(ctx, tx, l, 0))
	copied, err := db.ListRowsCopy(ctx, tx, l.ID, &rows{n: n})
	require.NoError(t, err)
	require.EqualValues(t, n, copied)
	return l
}

// Answering a row, or failing a chunk, reads those rows and their
// duplicates, not the whole list, even when list_row's statistics predate
// the upload (autovacuum has not analyzed it yet): otherwise a million-row
// list drains at a few rows a second.
func TestListRowUpdates_ReadTheirRowsNotTheList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	uploadRows(t, tx, 2_000)
	_, err := tx.Exec(ctx, `ANALYZE list_row`) // statistics that know only that list
	require.NoError(t, err)
	l := uploadRows(t, tx, 20_000)

	before := tuplesRead(t, tx)
	done, err := db.ListRowFinish(ctx, tx, l.ID, 5, classifier.Result{Domain: "d5.com", Classifier: "cpg",
		Status: classifier.StatusCompleted, Answer: true, Confidence: 4, Source: classifier.SourceKnown, ClassifiedAt: time.Now()}, "o")
	require.NoError(t, err)
	require.Equal(t, 2, done, "row 5 and its duplicate, row 10")
	require.Less(t, tuplesRead(t, tx)-before, int64(100), "tuples of list_row read to answer one row")

	// A set of a chunk's answers (a process's RowStore, a batch's) reads
	// about its chunk's rows.
	var set []db.RowAnswer
	for row := 201; row <= 400; row += 2 {
		set = append(set, db.RowAnswer{Row: row, Result: classifier.Result{Domain: fmt.Sprintf("d%d.com", row), Classifier: "cpg",
			Status: classifier.StatusCompleted, Answer: true, Confidence: 4, Source: classifier.SourceKnown, ClassifiedAt: time.Now()}})
	}
	before = tuplesRead(t, tx)
	stored, err := db.ListRowsStore(ctx, tx, []db.RowSet{{ListID: l.ID, Answers: set}})
	require.NoError(t, err)
	require.Greater(t, stored[0].Rows, len(set), "the set's rows and their duplicates")
	require.Less(t, tuplesRead(t, tx)-before, int64(1000), "tuples of list_row read to store a chunk's set of answers")

	before = tuplesRead(t, tx)
	failed, err := db.ListRowsFail(ctx, tx, l.ID, 1, 200, "out of attempts")
	require.NoError(t, err)
	require.Equal(t, 200-2, failed, "rows 1-200 and their duplicates but 5 and 10, answered")
	require.Less(t, tuplesRead(t, tx)-before, int64(1000), "tuples of list_row read to fail a chunk")
}

// Many answers stored as a set (a provider batch's) read exactly as the
// same answers stored one at a time: the rows and their duplicates, the
// list's counters and cost, the shared results, and the claims released.
func TestListRowsFinish_StoresAsListRowFinishDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	upload := func() *classifier.List { return uploadRows(t, tx, 20) }
	one, set := upload(), upload()
	now := time.Now().UTC().Truncate(time.Microsecond)
	answer := func(i int) classifier.Result {
		d := fmt.Sprintf("d%d.com", i)
		r := classifier.Result{Domain: d, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: i%2 == 0, Confidence: 1 + i%5,
			Reasoning: "Because " + d, Source: classifier.SourceLLM, ClassifiedAt: now, Model: "m", PromptVersion: "v2", Search: "s",
			ProvenanceID: uuid.Must(uuid.NewV7()), BatchID: "batch_1",
			Evidence: []classifier.EvidenceItem{{URL: "https://" + d + "/", Title: d}, {URL: "https://" + d + "/about"}},
			Usage:    &classifier.Usage{PromptTokens: 100 + i, CompletionTokens: 10, Latency: time.Duration(i) * time.Millisecond, CostUSD: 0.001 * float64(i)}}
		switch i {
		case 3:
			r = classifier.Result{Domain: d, Classifier: "cpg", Status: classifier.StatusFailed, Error: "the model's answer was not JSON",
				Source: classifier.SourceLLM, ClassifiedAt: now, Model: "m", PromptVersion: "v2", ProvenanceID: uuid.Must(uuid.NewV7()),
				Usage: &classifier.Usage{PromptTokens: 5, CostUSD: 0.0001}}
		case 7:
			r.Evidence = nil
		}
		return r
	}
	var answers []db.RowAnswer
	for i := 1; i <= 9; i++ { // rows 1-9, and row 10 repeats row 5
		answers = append(answers, db.RowAnswer{Row: i, Result: answer(i)})
		held, ok, err := db.ClaimAcquire(ctx, tx, "cpg", answer(i).Domain, "batch:1", time.Hour, true)
		require.NoError(t, err)
		require.True(t, ok, "%+v", held)
	}
	for _, a := range answers {
		_, err := db.ListRowFinish(ctx, tx, one.ID, a.Row, a.Result, "batch:1")
		require.NoError(t, err)
	}
	resultsOne := map[string]classifier.Result{}
	for _, a := range answers {
		if r, err := db.ResultGet(ctx, tx, "cpg", a.Result.Domain); err == nil {
			resultsOne[a.Result.Domain] = *r
		}
	}
	for _, a := range answers { // as a batch would claim them again
		_, ok, err := db.ClaimAcquire(ctx, tx, "cpg", a.Result.Domain, "batch:1", time.Hour, true)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, err := tx.Exec(ctx, `DELETE FROM result`)
	require.NoError(t, err)
	n, err := db.ListRowsFinish(ctx, tx, set.ID, answers, "batch:1")
	require.NoError(t, err)
	require.Equal(t, 10, n, "rows 1-9 and row 10, row 5's duplicate")
	again, err := db.ListRowsFinish(ctx, tx, set.ID, answers, "batch:1")
	require.NoError(t, err)
	require.Zero(t, again, "rows already final keep their first answer")

	read := func(l *classifier.List) map[int]classifier.ListRow {
		out := map[int]classifier.ListRow{}
		_, err := db.ListResultsPage(ctx, tx, db.ListResultsParams{ListID: l.ID, Through: l.Rows},
			func(r *classifier.ListRow) bool { out[r.Row] = *r; return true })
		require.NoError(t, err)
		return out
	}
	oneRows, setRows := read(one), read(set)
	for row := 1; row <= 20; row++ {
		require.Equal(t, oneRows[row], setRows[row], "row %d", row)
	}
	require.Equal(t, classifier.StatusCompleted, setRows[10].Result.Status)
	for d, want := range resultsOne {
		got, err := db.ResultGet(ctx, tx, "cpg", d)
		require.NoError(t, err)
		require.Equal(t, want, *got, d)
	}
	counters := func(l *classifier.List) []any {
		var done, completed, failed, llm int
		var cost float64
		require.NoError(t, tx.QueryRow(ctx, `SELECT done, completed, failed, llm, cost_usd FROM list WHERE id = $1`, l.ID).
			Scan(&done, &completed, &failed, &llm, &cost))
		return []any{done, completed, failed, llm, fmt.Sprintf("%.6f", cost)}
	}
	require.Equal(t, counters(one), counters(set))
	require.Equal(t, []any{10, 9, 1, 9, "0.042100"}, counters(set), "0.001 a row but the failed 3rd, 0.0001")
	var claims int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM domain_claim`).Scan(&claims))
	require.Zero(t, claims, "the batch's claims are released")
}
