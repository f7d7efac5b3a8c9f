//go:build bench

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/internal/apikey"
)

// benchTracing: what tracing costs, measured on and off side by side:
// accept (POST /domains/classify, 50 clients across 100 callers: CPU-bound,
// where spans cost most) and the drain of jobs against the simulated model
// (C=16, L=200 ms). Traced runs export over OTLP/HTTP to a collector on
// loopback that accepts and counts what it gets.
func benchTracing(t *testing.T) []benchRow {
	seconds := time.Duration(envInt("BENCH_SECONDS", 5)) * time.Second
	latency := envDuration("BENCH_LLM_LATENCY", 200*time.Millisecond)
	c := envInt("BENCH_LLM_CONCURRENCY", 16)
	var exported atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL) // the exporter reads its settings from the process
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "500")

	env := func(traced bool) map[string]string {
		m := map[string]string{"AUTH": "on", "LOG_LEVEL": "error", "OTEL_TRACES_EXPORTER": "none",
			"LLM_MAX_CONCURRENCY": strconv.Itoa(c), "LLM_RATE_PER_MINUTE": "1000000",
			"CALLER_RATE_PER_MINUTE": "1000000", "CALLER_MAX_QUEUED_DOMAINS": "100000000"}
		if traced {
			m["OTEL_TRACES_EXPORTER"] = "otlp"
		}
		return m
	}
	accept := func(traced bool, sampled float64) loadStats {
		if sampled > 0 { // the SDK reads its sampler from the process's environment
			os.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
			os.Setenv("OTEL_TRACES_SAMPLER_ARG", strconv.FormatFloat(sampled, 'f', -1, 64))
			defer os.Unsetenv("OTEL_TRACES_SAMPLER")
			defer os.Unsetenv("OTEL_TRACES_SAMPLER_ARG")
		}
		e := newE2E(t, nil, env(traced))
		api := e.start(cli.RoleAPI)
		defer e.stop(api)
		keys := make([]string, 100)
		for i := range keys {
			key, hash := apikey.New()
			require.NoError(t, db.APIKeyInsert(context.Background(), api.DB.Pool, db.APIKey{Name: fmt.Sprintf("caller-%03d", i),
				Prefix: key[:8]}, hash))
			keys[i] = key
		}
		url := api.APIURL() + "/domains/classify"
		return load(50, seconds, func(cl *http.Client, w, i int) (int, error) {
			return post(cl, url, keys[(w*7919+i)%len(keys)], tenDomains(w, i))
		})
	}
	drain := func(traced bool) float64 {
		const jobs = 160 // 1,600 distinct domains: 20 s at C/L
		e := newE2E(t, llmtest.Steady(true, 4, "x", latency), env(traced))
		api := e.start(cli.RoleAPI)
		defer e.stop(api)
		for j := range jobs {
			var ds []string
			for k := range 10 {
				ds = append(ds, fmt.Sprintf("trace-%t-%d-%d.com", traced, j, k))
			}
			createJob(t, api, ds)
		}
		worker := e.start(cli.RoleWorker)
		defer e.stop(worker)
		start := time.Now()
		waitAllCompleted(t, api.DB, jobs, 5*time.Minute)
		return float64(jobs*10) / time.Since(start).Seconds()
	}

	// Off, on, sampled, sampled, on, off, twice: drift falls on all alike,
	// and four runs of each keep one noisy run (±8% here) from deciding.
	var off, on, sampled loadStats
	for range 2 {
		for _, run := range []struct {
			into    *loadStats
			traced  bool
			sampled float64
		}{{&off, false, 0}, {&on, true, 0}, {&sampled, true, 0.1}, {&sampled, true, 0.1}, {&on, true, 0}, {&off, false, 0}} {
			*run.into = merge(*run.into, accept(run.traced, run.sampled))
		}
	}
	require.Equal(t, on.requests, on.byStatus[http.StatusAccepted], "%v", on.byStatus)
	require.Equal(t, off.requests, off.byStatus[http.StatusAccepted], "%v", off.byStatus)
	d1, d2 := drain(false), drain(true)
	d3, d4 := drain(true), drain(false)
	dOff, dOn := (d1+d4)/2, (d2+d3)/2
	require.Positive(t, exported.Load(), "the traced runs exported spans")
	acceptRatio, sampledRatio, drainRatio := on.rate()/off.rate(), sampled.rate()/off.rate(), dOn/dOff
	return []benchRow{
		{"tracing", "accept req/s with tracing on (every trace) ÷ off (50 clients, OTLP/HTTP to loopback)", fmt.Sprintf("%.2f", acceptRatio),
			fmt.Sprintf("on %.0f/s, off %.0f/s; %d kB exported in all", on.rate(), off.rate(), exported.Load()/1000), "≥ 0.9",
			verdict(acceptRatio >= 0.9)},
		{"tracing", "  the same with 10% of traces sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio, _ARG=0.1)",
			fmt.Sprintf("%.2f", sampledRatio), fmt.Sprintf("sampled %.0f/s, off %.0f/s", sampled.rate(), off.rate()), "≥ 0.9",
			verdict(sampledRatio >= 0.9)},
		{"tracing", fmt.Sprintf("  drain domains/s with tracing on ÷ off (C=%d, L=%s)", c, latency), fmt.Sprintf("%.2f", drainRatio),
			fmt.Sprintf("on %.1f/s, off %.1f/s", dOn, dOff), "≥ 0.9", verdict(drainRatio >= 0.9)},
	}
}
