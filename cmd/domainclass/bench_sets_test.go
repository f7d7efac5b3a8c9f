//go:build bench

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"testing"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

// benchAnswered uploads a list whose domains are all answered already, half
// by overrides and half by the cache (a weekly CRM export, uploaded again),
// and times it from the upload's start to COMPLETED, against the upload's
// own time in the same run (issue 37).
func benchAnswered(t *testing.T) []benchRow {
	t.Helper()
	ctx := context.Background()
	n := envInt("BENCH_ANSWERED_ROWS", 1_000_000)
	list := genList(t, n, 43)
	e := newE2E(t, llmtest.Steady(true, 4, "x", 10*time.Millisecond), map[string]string{"LOG_LEVEL": "error"})
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 2})
	require.NoError(t, err)
	defer d.Close()

	// Half the domains overridden, the other half answered by the model a
	// day ago; the tables analyzed, as long-lived tables are.
	var overrides []classifier.Override
	var cached []string
	for i, dom := range list.domains {
		if i%2 == 0 {
			overrides = append(overrides, classifier.Override{Classifier: "cpg", Domain: dom, Answer: true, Confidence: 5,
				Note: "Checked by hand.", SetBy: "bench"})
		} else {
			cached = append(cached, dom)
		}
	}
	for from := 0; from < len(overrides); from += 50_000 {
		_, _, err := db.OverrideSet(ctx, d.Pool, overrides[from:min(from+50_000, len(overrides))])
		require.NoError(t, err)
	}
	// The cached answers' provenance ids: by default UUIDv7-like in the
	// list's order, as the answers of the export's last upload got them
	// (its chunks answer in row order; the overrides' ids, from
	// OverrideSet, are UUIDv7 in the same order); BENCH_ANSWERED_IDS=random
	// gives random ones, the worst case for every index keyed by them.
	ids := `(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-' || substr(md5(domain), 1, 12))::uuid`
	if os.Getenv("BENCH_ANSWERED_IDS") == "random" {
		ids = `gen_random_uuid()`
	}
	_, err = d.Pool.Exec(ctx, `
		WITH c AS (SELECT domain, `+ids+` AS id
		           FROM unnest($1::text[]) WITH ORDINALITY AS u (domain, n), lpad(to_hex(n), 12, '0') AS h),
		p AS (INSERT INTO provenance (id, model, prompt_version, search, evidence, created_at)
		      SELECT id, 'bench-model', 'v1', 'bench', jsonb_build_array(jsonb_build_object('url', 'https://' || domain || '/', 'title', domain)),
		             now() - interval '1 day' FROM c)
		INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, provenance_id, classified_at)
		SELECT domain, 'cpg', 'COMPLETED', false, 4, 'Sells software.', id, now() - interval '1 day' FROM c`, cached)
	require.NoError(t, err)
	for _, table := range []string{"override", "result", "provenance"} {
		_, err := d.Pool.Exec(ctx, "VACUUM ANALYZE "+table)
		require.NoError(t, err)
	}

	api := e.start(cli.RoleAPI)
	// As many rows nothing answers, uploaded first and cancelled before a
	// worker starts: what the same upload costs a list new to the service,
	// which the look-up leaves as it was.
	fresh := genList(t, n, 45)
	code, body, freshUpload := uploadList(t, api.APIURL(), fresh.gz, "")
	require.Equal(t, http.StatusAccepted, code, "%.300s", body)
	var f wire.ListAccepted
	require.NoError(t, json.Unmarshal(body, &f))
	cancelList(t, api.APIURL(), f.ListID)
	e.start(cli.RoleWorker)
	start := time.Now()
	code, body, upload := uploadList(t, api.APIURL(), list.gz, "")
	require.Equal(t, http.StatusAccepted, code, "%.300s", body)
	var a wire.ListAccepted
	require.NoError(t, json.Unmarshal(body, &a))
	end := waitListEnded(t, api.APIURL(), a.ListID, 30*time.Minute)
	total := end.Sub(start)
	s := e.listStatus(a.ListID)
	require.Equal(t, s.Rows-s.Progress.Rejected, s.Progress.Completed, "every row answered")
	ratio := total.Seconds() / upload.Seconds()
	return []benchRow{
		{"sets", fmt.Sprintf("%s-row list, every domain answered (½ overrides, ½ cache): upload → COMPLETED", count(n)),
			fmt.Sprintf("%.1f s (%.1f× the upload)", total.Seconds(), ratio),
			fmt.Sprintf("upload %.1f s, answered in it; %.1f× the upload of as many rows nothing answers (%.1f s)",
				upload.Seconds(), total.Seconds()/freshUpload.Seconds(), freshUpload.Seconds()),
			"≤ 3× the upload", verdict(ratio <= 3)},
		{"sets", "  model calls for it", fmt.Sprint(e.llm.Total()), "-", "0", verdict(e.llm.Total() == 0)},
	}
}

// benchBatchStore stores 100,000 answers of a provider batch into a list's
// rows as the batch worker does (db.ListRowsFinish, 1,000 a statement),
// against storing them one at a time as it did (db.ListRowFinish, timed
// on the first 5,000 of another list of the same rows), in the same run.
func benchBatchStore(t *testing.T) []benchRow {
	t.Helper()
	ctx := context.Background()
	n := envInt("BENCH_BATCH_STORE_ROWS", 100_000)
	d := dbtest.New(t)
	list := genList(t, n, 44)
	upload := func() *classifier.List {
		l := &classifier.List{ID: uuid.New(), Caller: "bench", Classifier: "cpg", Rows: n, Domains: len(list.domains),
			ChunkRows: 200, Chunks: (n + 199) / 200, Retention: time.Hour, Tier: classifier.TierEconomy}
		require.NoError(t, db.ListInsert(ctx, d.Pool, l, 0))
		_, err := db.ListRowsCopy(ctx, d.Pool, l.ID, &benchRows{rows: list.rows})
		require.NoError(t, err)
		return l
	}
	answers := make([]db.RowAnswer, 0, len(list.domains))
	for _, r := range list.rows {
		if r.Domain == "" || r.FirstRow != 0 {
			continue
		}
		answers = append(answers, db.RowAnswer{Row: r.Row, Result: classifier.Result{Domain: r.Domain, Classifier: "cpg",
			Status: classifier.StatusCompleted, Answer: r.Row%3 == 0, Confidence: 4, Reasoning: "Sells packaged snacks in supermarkets.",
			Source: classifier.SourceLLM, ClassifiedAt: time.Now(), Model: "gpt-5.4-mini", PromptVersion: "v3", Search: "bench",
			BatchID: "batch_bench", Evidence: []classifier.EvidenceItem{{URL: "https://" + r.Domain + "/", Title: r.Domain}},
			Usage: &classifier.Usage{PromptTokens: 900, CompletionTokens: 60, CostUSD: 0.0002}}})
	}
	byRow := upload()
	start := time.Now()
	sample := min(5_000, len(answers))
	for _, a := range answers[:sample] {
		r := a.Result
		r.ProvenanceID = uuid.Nil
		_, err := db.ListRowFinish(ctx, d.Pool, byRow.ID, a.Row, r, "batch:bench")
		require.NoError(t, err)
	}
	oneRate := float64(sample) / time.Since(start).Seconds()

	bySet := upload()
	start = time.Now()
	stored := 0
	for from := 0; from < len(answers); from += 1000 {
		k, err := db.ListRowsFinish(ctx, d.Pool, bySet.ID, answers[from:min(from+1000, len(answers))], "batch:bench")
		require.NoError(t, err)
		stored += k
	}
	took := time.Since(start)
	setRate := float64(len(answers)) / took.Seconds()
	return []benchRow{{"sets", fmt.Sprintf("economy batch of %s answers stored into its list (%s rows with duplicates)", count(len(answers)), count(stored)),
		fmt.Sprintf("%.0fk answers/s (%.1f s)", setRate/1000, took.Seconds()),
		fmt.Sprintf("one at a time %.1fk/s (%.0f×)", oneRate/1000, setRate/oneRate), "≥ 20k/s", verdict(setRate >= 20_000)}}
}

// benchRows is a db.ListRowSource over generated rows.
type benchRows struct {
	rows []db.ListRowIn
	i    int
}

func (b *benchRows) Next() bool        { b.i++; return b.i <= len(b.rows) }
func (b *benchRows) Row() db.ListRowIn { return b.rows[b.i-1] }
func (b *benchRows) Err() error        { return nil }
