package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// claimsOf is domain_claim as domain -> owner, for classifier cpg.
func claimsOf(t *testing.T, tx db.DBTX) map[string]string {
	t.Helper()
	out := map[string]string{}
	rows, err := tx.Query(context.Background(), `SELECT domain, owner FROM domain_claim WHERE classifier = 'cpg'`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var d, o string
		require.NoError(t, rows.Scan(&d, &o))
		out[d] = o
	}
	require.NoError(t, rows.Err())
	return out
}

// A chunk claims, in one statement, the domains it has still to answer:
// its range's pending first rows, none another holds live. What it did not
// answer goes back, and only its own claims.
func TestClaimListRows_TakesTheRangesPendingFirstRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	// Rows 1-20 are d1-d20, but row 10 repeats row 5 and row 20 row 15.
	l := &classifier.List{ID: uuid.New(), Caller: "a", Classifier: "cpg", Rows: 20, Domains: 18, Duplicates: 2, ChunkRows: 200, Chunks: 1, Retention: time.Hour}
	require.NoError(t, db.ListInsert(ctx, tx, l, 0))
	_, err := db.ListRowsCopy(ctx, tx, l.ID, &rows{n: 20})
	require.NoError(t, err)
	_, err = db.ListRowFinish(ctx, tx, l.ID, 7, classifier.Result{Domain: "d7.com", Classifier: "cpg", Status: classifier.StatusCompleted,
		Answer: true, Confidence: 4, Source: classifier.SourceKnown, ClassifiedAt: time.Now()}, "")
	require.NoError(t, err)
	_, ok, err := db.ClaimAcquire(ctx, tx, "cpg", "d8.com", "river:9", time.Hour, false)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = db.ClaimAcquire(ctx, tx, "cpg", "d9.com", "river:8", time.Hour, false)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = tx.Exec(ctx, `UPDATE domain_claim SET expires_at = now() - interval '1 second' WHERE domain = 'd9.com'`)
	require.NoError(t, err)

	// Rows 6-14: row 7 is final, d8 held live by another, d9's holder's
	// lease ran out, and row 10 repeats row 5, outside the range.
	claim := func() []string {
		t.Helper()
		got, err := db.ClaimListRows(ctx, tx, l.ID, "cpg", 6, 14, "river:1", time.Hour)
		require.NoError(t, err)
		slices.Sort(got)
		return got
	}
	want := []string{"d11.com", "d12.com", "d13.com", "d14.com", "d6.com", "d9.com"}
	require.Equal(t, want, claim())
	require.Equal(t, map[string]string{"d6.com": "river:1", "d8.com": "river:9", "d9.com": "river:1", "d11.com": "river:1",
		"d12.com": "river:1", "d13.com": "river:1", "d14.com": "river:1"}, claimsOf(t, tx))
	require.Equal(t, want, claim(), "a later run of the chunk claims its own domains again")

	// The same domains of another classifier are not the chunk's.
	_, ok, err = db.ClaimAcquire(ctx, tx, "other", "d6.com", "river:1", time.Hour, false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, db.DomainClaimsRelease(ctx, tx, "cpg", []string{"d6.com", "d8.com", "d9.com", "d11.com"}, "river:1"))
	require.Equal(t, map[string]string{"d8.com": "river:9", "d12.com": "river:1", "d13.com": "river:1", "d14.com": "river:1"},
		claimsOf(t, tx), "only river:1's claims on those domains go")
	var other int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM domain_claim WHERE classifier = 'other'`).Scan(&other))
	require.Equal(t, 1, other)
}

// The answers of several lists stored in one call (a process's row store)
// read exactly as the same answers stored one at a time: each list's rows
// and duplicates, the shared results, the provenance, each list's counters,
// and the claims of the answers' owners released (another's left alone).
func TestListRowsStore_StoresAsListRowFinishDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	upload := func() *classifier.List { return uploadRows(t, tx, 20) }
	oneA, oneB, setA, setB, seed := upload(), upload(), upload(), upload(), upload()
	now := time.Now().UTC().Truncate(time.Microsecond)

	// d6's fresh answer is in the cache (from an earlier list), d4 has an
	// override.
	seedAnswer := classifier.Result{Domain: "d6.com", Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true, Confidence: 3,
		Reasoning: "Earlier.", Source: classifier.SourceLLM, ClassifiedAt: now.Add(-time.Hour), Model: "m", PromptVersion: "v1",
		ProvenanceID: uuid.Must(uuid.NewV7())}
	_, err := db.ListRowFinish(ctx, tx, seed.ID, 6, seedAnswer, "")
	require.NoError(t, err)
	cached, err := db.ResultGet(ctx, tx, "cpg", "d6.com")
	require.NoError(t, err)
	cached.Source = classifier.SourceCache
	_, _, err = db.OverrideSet(ctx, tx, []classifier.Override{{Classifier: "cpg", Domain: "d4.com", Answer: false, Confidence: 5,
		Note: "Not a brand.", SetBy: "ops"}})
	require.NoError(t, err)
	override, err := db.OverrideGet(ctx, tx, "cpg", "d4.com")
	require.NoError(t, err)

	model := func(i int) classifier.Result {
		d := fmt.Sprintf("d%d.com", i)
		return classifier.Result{Domain: d, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: i%2 == 0, Confidence: 1 + i%5,
			Reasoning: "Because " + d, Source: classifier.SourceLLM, ClassifiedAt: now, Model: "m", PromptVersion: "v2", Search: "s",
			ProvenanceID: uuid.Must(uuid.NewV7()),
			Evidence:     []classifier.EvidenceItem{{URL: "https://" + d + "/", Title: d, Snippet: "About " + d}},
			Usage:        &classifier.Usage{PromptTokens: 100 + i, CompletionTokens: 10, Latency: time.Duration(i) * time.Millisecond, CostUSD: 0.001 * float64(i)}}
	}
	// List A answers rows 1-9 (row 10 repeats row 5): the model, a model's
	// failure (3), the override (4), the cache (6), a failure with no
	// model call (8). List B answers rows 11-19 (row 20 repeats 15), all
	// the model's. Each answer's owner is its chunk's; d7's claim is
	// another's (a job that took it after the chunk's lease ran out).
	var a, b []db.RowAnswer
	for i := 1; i <= 9; i++ {
		r := model(i)
		switch i {
		case 3:
			r = classifier.Result{Domain: "d3.com", Classifier: "cpg", Status: classifier.StatusFailed, Error: "the model's answer was not JSON",
				Source: classifier.SourceLLM, ClassifiedAt: now, Model: "m", PromptVersion: "v2", ProvenanceID: uuid.Must(uuid.NewV7()),
				Usage: &classifier.Usage{PromptTokens: 5, CostUSD: 0.0001}}
		case 4:
			r = override.Result()
		case 6:
			r = *cached
		case 8:
			r = classifier.Result{Domain: "d8.com", Classifier: "cpg", Status: classifier.StatusFailed, Error: "no search results", ClassifiedAt: now}
		}
		a = append(a, db.RowAnswer{Row: i, Result: r, Owner: "river:1"})
	}
	for i := 11; i <= 19; i++ {
		b = append(b, db.RowAnswer{Row: i, Result: model(i), Owner: "river:2"})
	}
	claimAll := func() {
		t.Helper()
		for _, as := range [][]db.RowAnswer{a, b} {
			for _, x := range as {
				owner := x.Owner
				if x.Row == 7 {
					owner = "river:9"
				}
				_, ok, err := db.ClaimAcquire(ctx, tx, "cpg", x.Result.Domain, owner, time.Hour, false)
				require.NoError(t, err)
				require.True(t, ok, x.Result.Domain)
			}
		}
	}
	var modelDomains []string
	var provenanceIDs []uuid.UUID
	for _, x := range slices.Concat(a, b) {
		if x.Result.Source == classifier.SourceLLM {
			modelDomains = append(modelDomains, x.Result.Domain)
			provenanceIDs = append(provenanceIDs, x.Result.ProvenanceID)
		}
	}
	jsonRows := func(sql string, args ...any) []string {
		t.Helper()
		rows, err := tx.Query(ctx, sql, args...)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var j json.RawMessage
			require.NoError(t, rows.Scan(&j))
			out = append(out, string(j))
		}
		require.NoError(t, rows.Err())
		return out
	}
	results := func() []string {
		return jsonRows(`SELECT to_jsonb(r) FROM result r WHERE domain = ANY($1) ORDER BY domain`, modelDomains)
	}
	provenance := func() []string {
		return jsonRows(`SELECT to_jsonb(p) FROM provenance p WHERE id = ANY($1) ORDER BY id`, provenanceIDs)
	}
	// What the review queue took of the model's answers (its own ids
	// aside).
	reviews := func() []string {
		return jsonRows(`SELECT to_jsonb(r) - 'id' FROM review_item r WHERE provenance_id = ANY($1) ORDER BY provenance_id`, provenanceIDs)
	}
	listRows := func(l *classifier.List) []string {
		return jsonRows(`SELECT to_jsonb(t) - 'list_id' FROM list_row t WHERE list_id = $1 ORDER BY row`, l.ID)
	}
	counters := func(l *classifier.List) []any {
		t.Helper()
		var done, completed, failed, override, known, cache, llm int
		var cost float64
		require.NoError(t, tx.QueryRow(ctx, `SELECT done, completed, failed, override, known, cache, llm, cost_usd FROM list WHERE id = $1`, l.ID).
			Scan(&done, &completed, &failed, &override, &known, &cache, &llm, &cost))
		return []any{done, completed, failed, override, known, cache, llm, fmt.Sprintf("%.6f", cost)}
	}

	// One at a time, as ListRowFinish stores each.
	claimAll()
	for _, x := range a {
		_, err := db.ListRowFinish(ctx, tx, oneA.ID, x.Row, x.Result, x.Owner)
		require.NoError(t, err)
	}
	for _, x := range b {
		_, err := db.ListRowFinish(ctx, tx, oneB.ID, x.Row, x.Result, x.Owner)
		require.NoError(t, err)
	}
	require.Equal(t, map[string]string{"d7.com": "river:9"}, claimsOf(t, tx))
	resultsOne, provenanceOne, reviewsOne := results(), provenance(), reviews()
	rowsOneA, rowsOneB, countersOneA, countersOneB := listRows(oneA), listRows(oneB), counters(oneA), counters(oneB)
	require.Len(t, rowsOneA, 20)
	require.NotEmpty(t, reviewsOne, "the low-confidence answers are queued for review")
	require.Len(t, resultsOne, len(modelDomains))
	require.Len(t, provenanceOne, len(provenanceIDs))
	// What the set writes is its own: the answers' provenance goes (with
	// the rows that point at it, read above) and is written again.
	_, err = tx.Exec(ctx, `DELETE FROM list_row WHERE list_id = ANY($1)`, []uuid.UUID{oneA.ID, oneB.ID})
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM result WHERE domain = ANY($1)`, modelDomains)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM review_item WHERE provenance_id = ANY($1)`, provenanceIDs)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM provenance WHERE id = ANY($1)`, provenanceIDs)
	require.NoError(t, err)
	require.Empty(t, results())

	// As a set: both lists in one call.
	claimAll()
	stored, err := db.ListRowsStore(ctx, tx, []db.RowSet{{ListID: setA.ID, Answers: a}, {ListID: setB.ID, Answers: b}})
	require.NoError(t, err)
	require.Equal(t, []db.RowsStored{{Rows: 10, Completed: 8, Failed: 2}, {Rows: 10, Completed: 10}}, stored,
		"rows 1-9 and row 10 (row 5's duplicate), d3 and d8 failed; rows 11-19 and row 20 (row 15's)")
	require.Equal(t, map[string]string{"d7.com": "river:9"}, claimsOf(t, tx),
		"the answers' owners' claims are released, another's on d7 is left")
	require.Equal(t, rowsOneA, listRows(setA))
	require.Equal(t, rowsOneB, listRows(setB))
	require.Equal(t, resultsOne, results())
	require.Equal(t, provenanceOne, provenance())
	require.Equal(t, reviewsOne, reviews())
	require.Equal(t, countersOneA, counters(setA))
	require.Equal(t, countersOneB, counters(setB))
	require.Equal(t, []any{10, 8, 2, 1, 0, 1, 6, "0.024100"}, counters(setA),
		"0.001 × i a model row (1, 2, 5, 7, 9: 0.024) and row 3's 0.0001; an override, a cache and a failure cost nothing")

	again, err := db.ListRowsStore(ctx, tx, []db.RowSet{{ListID: setA.ID, Answers: a}, {ListID: setB.ID, Answers: b}})
	require.NoError(t, err)
	require.Equal(t, []db.RowsStored{{}, {}}, again, "rows already final keep their first answer")
	require.Equal(t, countersOneA, counters(setA))
}
