//go:build bench

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/stretchr/testify/require"

	"testing"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
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
	_, err = d.Pool.Exec(ctx, `
		WITH c AS (SELECT domain, gen_random_uuid() AS id FROM unnest($1::text[]) AS u (domain)),
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

	api := e.start(RoleAPI)
	e.start(RoleWorker)
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
			fmt.Sprintf("upload %.1f s; answering %.0fk rows/s", upload.Seconds(), float64(n)/(total-upload).Seconds()/1000),
			"≤ 3× the upload", verdict(ratio <= 3)},
		{"sets", "  model calls for it", fmt.Sprint(e.llm.Total()), "-", "0", verdict(e.llm.Total() == 0)},
	}
}
