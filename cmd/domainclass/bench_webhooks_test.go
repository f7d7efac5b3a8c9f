//go:build bench

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
)

// benchWebhooks: a healthy receiver's delivery latency (job completed_at
// to receipt), first alone and then while another caller's receiver hangs
// until the delivery timeout with 40 deliveries queued for it: the finding
// of a hostile review was 26.9 s instead of ~15 ms.
func benchWebhooks(t *testing.T) []benchRow {
	const jobs, hung = 20, 40
	e := newE2E(t, llmtest.Steady(true, 4, "x", 0), map[string]string{
		"AUTH": "on", "LOG_LEVEL": "error", "WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true",
		"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "1000000",
	})
	e.start(cli.RoleAPI)
	e.start(cli.RoleWorker)
	healthyKey, hangingKey := e.apiKey("healthy"), e.apiKey("hanging")
	e.key = healthyKey // the jobs waited for are the healthy caller's
	rc := newHookReceiver(t)
	var hanging atomic.Int32
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices when the sender hangs up
		<-r.Context().Done()               // until the sender's WEBHOOK_TIMEOUT
	}))
	defer stuck.Close()

	post := func(key, domain, callback string) string {
		t.Helper()
		status, body := e.post(fmt.Sprintf(`{"domains": [%q]}`, domain), "Authorization", "Bearer "+key,
			"X-Callback-URL", callback)
		require.Equal(t, http.StatusAccepted, status, "%s", body)
		var a jobView
		require.NoError(t, json.Unmarshal(body, &a))
		return a.JobID
	}
	latencies := func(run string) []time.Duration {
		var out []time.Duration
		for i := range jobs {
			id := post(healthyKey, fmt.Sprintf("%s%d.com", run, i), rc.srv.URL+"/hooks")
			v := e.wait(id, "COMPLETED", 30*time.Second)
			var got []hookDelivery
			require.Eventually(t, func() bool { got = rc.forJob(id); return len(got) > 0 }, 60*time.Second,
				2*time.Millisecond, "no delivery for job %s", id)
			out = append(out, got[0].at.Sub(*v.CompletedAt))
		}
		return out
	}

	idle := latencies("idle")
	for i := range hung {
		post(hangingKey, fmt.Sprintf("hung%d.com", i), stuck.URL+"/hooks")
	}
	require.Eventually(t, func() bool { return hanging.Load() > 0 }, 30*time.Second, 5*time.Millisecond)
	loaded := latencies("loaded")
	held := hanging.Load()
	p95Idle, p95Loaded := percentile(idle, 0.95), percentile(loaded, 0.95)
	return []benchRow{{
		Section: "webhooks",
		Measure: fmt.Sprintf("healthy receiver's p95 delivery latency (%d jobs) while another caller's receiver hangs with %d deliveries", jobs, hung),
		Value:   p95Loaded.Round(100 * time.Microsecond).String(),
		Compared: fmt.Sprintf("idle p95 %s (%.2f×); %d requests held by the hanging receiver",
			p95Idle.Round(100*time.Microsecond), float64(p95Loaded)/float64(p95Idle), held),
		Bar: "≤ 2× idle", Verdict: verdict(p95Loaded <= 2*p95Idle),
	}}
}
