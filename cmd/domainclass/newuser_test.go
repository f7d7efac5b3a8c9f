package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/domainclass/domainclass/cli"
	"github.com/stretchr/testify/require"
)

// TestModelBounds (issue 36, a new user): LLM_MAX_CONCURRENCY=32 with no
// rate set made 5 calls a second (LLM_RATE_PER_MINUTE's default, 300);
// a rate not set now follows the concurrency that is, a call a second per
// slot, and the account's limits and explicit settings win as before.
func TestModelBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env                       []string
		concurrency, rate         int
		concurrencyFrom, rateFrom string
	}{
		{nil, 8, 300, "default", "default"},
		{[]string{"LLM_MAX_CONCURRENCY=32"}, 32, 1920, "LLM_MAX_CONCURRENCY", "LLM_MAX_CONCURRENCY × 60"},
		{[]string{"LLM_MAX_CONCURRENCY=2"}, 2, 300, "LLM_MAX_CONCURRENCY", "default"},
		{[]string{"LLM_MAX_CONCURRENCY=32", "LLM_RATE_PER_MINUTE=100"}, 32, 100, "LLM_MAX_CONCURRENCY", "LLM_RATE_PER_MINUTE"},
		{[]string{"LLM_MAX_CONCURRENCY=32", "LLM_ACCOUNT_RPM=600"}, 32, 600, "LLM_MAX_CONCURRENCY", "LLM_ACCOUNT_RPM"},
		{[]string{"LLM_ACCOUNT_CONCURRENCY=16"}, 16, 960, "LLM_ACCOUNT_CONCURRENCY", "LLM_ACCOUNT_CONCURRENCY × 60"},
	} {
		cfg, err := LoadConfig(tc.env)
		require.NoError(t, err, tc.env)
		require.Equal(t, []any{tc.concurrency, tc.concurrencyFrom, tc.rate, tc.rateFrom},
			[]any{cfg.LLMMaxConcurrency, cfg.LLMConcurrencyFrom, cfg.LLMRatePerMinute, cfg.LLMRateFrom}, tc.env)
	}
}

// lockedWriter is a log destination that tests read while it is written.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestFirstSteps (issue 36, a new user): what someone trying the binary
// and a deployment for the first time reaches for answers.
func TestFirstSteps(t *testing.T) {
	t.Parallel()

	t.Run("VersionIsTheBinarys", func(t *testing.T) {
		t.Parallel()
		var out, errOut strings.Builder
		code := Run(context.Background(), []string{"--version"}, nil, strings.NewReader(""), &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		require.True(t, strings.HasPrefix(out.String(), "domainclass "+Version+" ("), out.String())
	})

	// Nothing at start-up said which model limits were in effect.
	t.Run("AWorkerLogsItsModelLimitsOnce", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"LLM_MAX_CONCURRENCY": "32", "LLM_ACCOUNT_TPM": "90000"})
		delete(e.env, "LLM_RATE_PER_MINUTE")
		cfg, err := LoadConfig(e.environ())
		require.NoError(t, err)
		var logs lockedWriter
		m := NewMain(cfg, cli.RoleWorker, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
		m.TestOnly = true
		require.NoError(t, m.Run(context.Background()))
		e.mains = append(e.mains, m)
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="model limits"`) {
				lines = append(lines, l)
			}
		}
		require.Len(t, lines, 1, logs.String())
		for _, want := range []string{"level=INFO", "concurrency=32 concurrency_from=LLM_MAX_CONCURRENCY",
			`rate_per_minute=1920 rate_from="LLM_MAX_CONCURRENCY × 60"`, "account_rpm=0 account_tpm=90000 account_concurrency=0",
			"stated_rpm=0 stated_tpm=0"} {
			require.Contains(t, lines[0], want)
		}
	})

	t.Run("WorkerHealthAnswersHEAD", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		w := e.start(cli.RoleWorker)
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Head(w.WorkerURL() + path)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Empty(t, body, path)
		}
	})
}
