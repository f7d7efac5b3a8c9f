//go:build bench

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/wire"
)

// benchEconomy: the economy tier against the standard one, in one run, on
// a fake provider whose calls take 5 ms and whose batches answer 99% of
// their requests (the last 1% of each batch expires and falls back to a
// call, as when the provider misses its window):
//   - model cost per fresh domain of a 20k-domain list, economy ÷ standard,
//     from the price table (gpt-5.4-mini), fallbacks included;
//   - worker and model slots held while the economy list's 10 batches are
//     in progress (River jobs running, sampled every 10 ms for 5 s);
//   - model requests (batch lines run and calls) per distinct domain across
//     an economy list, a standard list and 100 jobs sharing 30% of their
//     domains.
func benchEconomy(t *testing.T) []benchRow {
	const (
		size     = 20_000
		perBatch = 2_000
		undone   = perBatch / 100
	)
	e := newE2E(t, llmtest.Steady(true, 4, "x", 5*time.Millisecond), map[string]string{
		"OPENAI_MODEL": "gpt-5.4-mini", "BATCH_MAX_REQUESTS": fmt.Sprint(perBatch), "BATCH_POLL_INTERVAL": "200ms",
		"LLM_MAX_CONCURRENCY": "16", "LLM_RATE_PER_MINUTE": "1000000", "LOG_LEVEL": "error",
		"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
	})
	hold := make(chan struct{})
	e.llm.Batch.Hold, e.llm.Batch.End, e.llm.Batch.ExpireAfter = hold, "expired", perBatch-undone
	api := e.start(cli.RoleAPI)
	worker := e.start(cli.RoleWorker)
	upload := func(tier, prefix string, from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, "%s-%d.com\n", prefix, i)
		}
		req, _ := http.NewRequest(http.MethodPost, api.APIURL()+"/lists?tier="+tier, bytes.NewReader(gzipBytes(t, b.String())))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		var a wire.ListAccepted
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
		return a.ListID
	}
	status := func(id string) wire.ListStatus {
		resp, err := http.Get(api.APIURL() + "/lists/" + id)
		require.NoError(t, err)
		defer resp.Body.Close()
		var s wire.ListStatus
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
		return s
	}
	calls := func(prefix string) (batched, direct int) {
		for _, r := range e.llm.Requests() {
			if strings.HasPrefix(r.Domain, prefix) {
				if r.Batch != "" {
					batched++
				} else {
					direct++
				}
			}
		}
		return batched, direct
	}

	// The economy list, held in progress while the slots are sampled.
	econ := upload("economy", "econ", 0, size)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		inProgress := 0
		for _, s := range e.llm.BatchStatuses() {
			if s == "in_progress" {
				inProgress++
			}
		}
		if inProgress == size/perBatch {
			break
		}
		require.True(t, time.Now().Before(deadline), "batches: %v", e.llm.BatchStatuses())
		time.Sleep(50 * time.Millisecond) // polling the fake, with a deadline
	}
	// A batch job holds a worker slot only while it runs: a poll. Jobs that
	// held theirs between polls would be seen running in every sample: 10
	// slots on average.
	var (
		samples, held, busiest, none, modelSlots int
		longest                                  float64
	)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var (
			running int
			age     float64
		)
		require.NoError(t, worker.DB.Pool.QueryRow(context.Background(), `
			SELECT count(*), coalesce(max(extract(epoch FROM now() - attempted_at)), 0)::float8
			FROM river_job WHERE kind = 'llm_batch' AND state = 'running'`).Scan(&running, &age))
		samples, held, busiest, longest = samples+1, held+running, max(busiest, running), max(longest, age)
		if running == 0 {
			none++
		}
		if samples%10 == 1 {
			modelSlots = max(modelSlots, int(metric(t, scrape(t, worker.WorkerURL()), `domainclass_llm_slots_in_use{class="list"}`)))
		}
	}
	close(hold)
	waitListEnded(t, api.APIURL(), econ, 10*time.Minute)
	econStatus := status(econ)
	_, econFallbacks := calls("econ-")

	std := upload("standard", "std", 0, size)
	waitListEnded(t, api.APIURL(), std, 10*time.Minute)
	stdStatus := status(std)
	econPer, stdPer := econStatus.CostUSD/size, stdStatus.CostUSD/size
	costRatio := econPer / stdPer

	// Sharing: an economy list (0..1999), a standard list (1400..3399) and
	// 100 jobs of 10 domains, 3 of them from the lists, at once.
	shared := []string{upload("economy", "shared", 0, 2000), upload("standard", "shared", 1400, 2000)}
	distinct := 3400
	var jobIDs []string
	for j := range 100 {
		var ds []string
		for k := range 3 {
			ds = append(ds, fmt.Sprintf("shared-%d.com", (j*37+k*997)%3400))
		}
		for k := range 7 {
			ds = append(ds, fmt.Sprintf("sharedjob-%d-%d.com", j, k))
		}
		distinct += 7
		jobIDs = append(jobIDs, e.submit(ds...))
	}
	for _, id := range shared {
		waitListEnded(t, api.APIURL(), id, 10*time.Minute)
	}
	for _, id := range jobIDs {
		e.wait(id, "COMPLETED", 5*time.Minute)
	}
	sharedBatched, sharedDirect := calls("shared")
	requests := sharedBatched + sharedDirect

	return []benchRow{
		{"economy", fmt.Sprintf("model cost per fresh domain, economy ÷ standard (%dk-domain lists, gpt-5.4-mini's prices)", size/1000),
			fmt.Sprintf("%.3f", costRatio), fmt.Sprintf("$%.7f vs $%.7f a domain; %d of %d economy domains fell back to a call (%.1f%%)",
				econPer, stdPer, econFallbacks, size, 100*float64(econFallbacks)/size),
			"0.50 ± 0.05", verdict(costRatio >= 0.45 && costRatio <= 0.55)},
		{"economy", fmt.Sprintf("  worker slots held by %d batches in progress, on average (%d samples over 5 s, a poll every 200 ms)", size/perBatch, samples),
			fmt.Sprintf("%.2f", float64(held)/float64(samples)), fmt.Sprintf("none held in %d%% of samples, at most %d (a round of polls), the longest run %.0f ms; %.3f at the default 1-minute poll; model slots %d",
				100*none/samples, busiest, longest*1000, float64(held)/float64(samples)*0.2/60, modelSlots),
			"0 between polls", verdict(float64(held)/float64(samples) < 0.25*size/perBatch && modelSlots == 0)},
		{"economy", "model requests per distinct domain: an economy list, a standard list, 100 jobs sharing 30%",
			fmt.Sprintf("%.2f", float64(requests)/float64(distinct)), fmt.Sprintf("%d requests (%d batch lines, %d calls incl. fallbacks) for %d domains",
				requests, sharedBatched, sharedDirect, distinct),
			"= 1.00", verdict(requests == distinct)},
	}
}
