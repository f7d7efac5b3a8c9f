//go:build bench

package db_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// storedRowBytes is what an answered list row takes in Postgres, its
// indexes and TOAST included, by search provider (one evidence address,
// or five), as httpapi/limits.go (DefaultCallerMaxStoredRows) and
// docs/operating.md state it (measured at 100,000 rows: 477 B and 754 B);
// the measurement below fails when it drifts more than a quarter from it.
var storedRowBytes = map[string]int64{"homepage": 480, "brave": 750}

// TestListRowStorage measures what a caller's stored list row costs: a
// list of realistic rows (a CRM export's website and account id) is copied
// in as an upload does, then answered row by row as the workers do
// (db.ListRowFinish, eight at a time: the row's answer, reasoning, model,
// prompt version and evidence addresses, and the shared result and
// provenance of the model call), and vacuumed as autovacuum would. It
// logs pg_total_relation_size (heap, TOAST and indexes) of list_row over
// its rows, and that of result and provenance over the fresh answers, for
// the homepage search (one evidence address) and Brave's (five).
//
//	go test -tags bench -run TestListRowStorage -v ./db/   # STORAGE_ROWS=100000 by default
func TestListRowStorage(t *testing.T) {
	n := 100_000
	if s := os.Getenv("STORAGE_ROWS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	for _, search := range []struct {
		name string
		urls int
	}{{"homepage", 1}, {"brave", 5}} {
		t.Run(search.name, func(t *testing.T) {
			copied, answered, shared := measureListRows(t, n, search.name, search.urls)
			t.Logf("%s: list_row %d B a row as uploaded (PENDING), %d B a row answered; result and provenance %d B a fresh answer",
				search.name, copied, answered, shared)
			want := storedRowBytes[search.name]
			require.InDelta(t, want, answered, float64(want)/4,
				"an answered row takes %d B: update httpapi/limits.go, docs/operating.md and storedRowBytes", answered)
		})
	}
}

// measureListRows stores and answers an n-row list on a schema of its own
// and returns the bytes a row of list_row takes as uploaded and as
// answered, and the bytes of result and provenance a fresh answer adds.
func measureListRows(t *testing.T, n int, search string, urls int) (copied, answered, shared int64) {
	ctx := context.Background()
	d := dbtest.New(t)
	c, err := classifier.DefaultRegistry().Get("cpg")
	require.NoError(t, err)
	versions := c.PromptVersions()
	prompt := versions[len(versions)-1]

	l := &classifier.List{ID: uuid.New(), Caller: "measure", Classifier: "cpg", Rows: n, Domains: n, ChunkRows: 1000,
		Chunks: (n + 999) / 1000, Retention: time.Hour}
	tx, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = db.ListRowsCopy(ctx, tx, l.ID, &exportRows{n: n})
	require.NoError(t, err)
	require.NoError(t, db.ListInsert(ctx, tx, l, 0))
	require.NoError(t, tx.Commit(ctx))
	copied = perRow(t, d, "list_row", n)

	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for row := 1 + w; row <= n; row += workers {
				if _, err := db.ListRowFinish(ctx, d.Pool, l.ID, row, answer(row, search, urls, prompt), "measure"); err != nil {
					errs <- fmt.Errorf("row %d: %w", row, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	answered = perRow(t, d, "list_row", n)
	shared = perRow(t, d, "result", n) + perRow(t, d, "provenance", n)
	return copied, answered, shared
}

// perRow vacuums table and returns its total size (heap, TOAST, indexes)
// over n rows.
func perRow(t *testing.T, d *db.DB, table string, n int) int64 {
	ctx := context.Background()
	_, err := d.Pool.Exec(ctx, "VACUUM (ANALYZE) "+table)
	require.NoError(t, err)
	var size int64
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&size))
	return size / int64(n)
}

// exportRows are a CRM export's rows: a website and an account id.
type exportRows struct{ n, i int }

func (r *exportRows) Next() bool { r.i++; return r.i <= r.n }
func (r *exportRows) Err() error { return nil }
func (r *exportRows) Row() db.ListRowIn {
	return db.ListRowIn{Row: r.i, Input: fmt.Sprintf("https://www.northwind-foods-%06d.com/", r.i),
		Ref: fmt.Sprintf("0015g00000%06dAAQ", r.i), Domain: fmt.Sprintf("northwind-foods-%06d.com", r.i)}
}

// answer is a model's answer to row, as a worker stores it: a one-line
// reasoning, and evidence of urls addresses with titles and snippets.
func answer(row int, search string, urls int, prompt string) classifier.Result {
	domain := fmt.Sprintf("northwind-foods-%06d.com", row)
	pages := []string{
		"https://www." + domain + "/",
		fmt.Sprintf("https://en.wikipedia.org/wiki/Northwind_Foods_%06d", row),
		fmt.Sprintf("https://www.linkedin.com/company/northwind-foods-%06d", row),
		fmt.Sprintf("https://www.crunchbase.com/organization/northwind-foods-%06d", row),
		fmt.Sprintf("https://www.bloomberg.com/profile/company/NWF%06d:US", row),
	}
	var evidence []classifier.EvidenceItem
	for _, page := range pages[:urls] {
		evidence = append(evidence, classifier.EvidenceItem{
			URL:   page,
			Title: "Northwind Foods | Snacks, sauces and drinks for every table",
			Snippet: "Northwind Foods makes packaged snacks, sauces and soft drinks sold in grocery and convenience stores " +
				"across North America. Our brands include Crunchy Bay, Golden Field and Fizz & Co. Find a store near you, " +
				"see our nutrition facts, or read about our factories.",
		})
	}
	return classifier.Result{
		Domain: domain, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true, Confidence: 5,
		Reasoning:    "Makes packaged snacks, sauces and soft drinks sold under its own brands through grocery and convenience stores.",
		Source:       classifier.SourceLLM,
		ClassifiedAt: time.Now(), Model: "gpt-5.4-mini", PromptVersion: prompt, Search: search, Evidence: evidence,
		Usage: &classifier.Usage{PromptTokens: 1400, CompletionTokens: 60, Latency: 1200 * time.Millisecond, CostUSD: 0.0012,
			Raw: `{"is_cpg": true, "confidence": 5, "reasoning": "Makes packaged snacks, sauces and soft drinks sold under its own brands."}`},
	}
}
