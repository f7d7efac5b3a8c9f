package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOneModelLimiter (issue 38): the deployment's capacity alone decides
// how many model calls start; a worker that sets no LLM_MAX_CONCURRENCY
// nor LLM_RATE_PER_MINUTE is bounded by the account's limits, configured
// or stated by the provider, not by 8 calls in flight and 300 a minute (a
// worker of 32 slots made 5 calls a second, issue 36).
func TestOneModelLimiter(t *testing.T) {
	t.Parallel()
	const jobs, perJob, want = 10, 5, 24 // 50 domains in flight at most (CLASSIFY_WORKERS × DOMAIN_CONCURRENCY)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		stated  int  // the provider's x-ratelimit-limit-requests; 0: none
		unknown bool // no limit known before the first answer
	}{
		{name: "TheAccountsConfiguredLimits", env: map[string]string{"LLM_ACCOUNT_RPM": "6000"}},
		{name: "TheProvidersStatedLimits", stated: 6000, unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
				a := llmtest.Answer(true, 4, "x")
				if strings.HasPrefix(r.Domain, "held") {
					a.Wait = release
				}
				return a
			}, tc.env)
			delete(e.env, "LLM_RATE_PER_MINUTE")
			if tc.stated > 0 {
				e.llm.SetAccount(llmtest.Account{RPM: tc.stated})
			}
			m := e.start(cli.RoleAll)
			if tc.unknown {
				require.Contains(t, readyz(t, m.APIURL()), "no limit of the model provider's account is known")
			}
			// One answer: the provider states its limits, if it does.
			e.wait(e.submit("first.com"), "COMPLETED", dbtest.Patience())
			require.NotContains(t, readyz(t, m.APIURL()), "detail", "a limit is known")
			for i := range jobs {
				var domains []string
				for k := range perJob {
					domains = append(domains, fmt.Sprintf("held%d-%d.com", i, k))
				}
				e.submit(domains...)
			}
			assert.Eventually(t, func() bool { return e.llm.InFlight() >= want }, dbtest.Patience(), 20*time.Millisecond)
			require.GreaterOrEqual(t, e.llm.MaxInFlight(), want, "model calls in flight at most, of %d domains waiting", jobs*perJob)
		})
	}
}

// readyz returns the body of base's /readyz, which must answer 200.
func readyz(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
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

	// Nothing at start-up said which model limits were in effect (issue
	// 36), nor that none was known (issue 38).
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
		// unknown: no limit of the account is known, which the worker
		// warns of and its /readyz says.
		unknown bool
	}{
		{"AWorkerLogsItsModelLimitsOnce", map[string]string{"LLM_MAX_CONCURRENCY": "32", "LLM_ACCOUNT_TPM": "90000"},
			[]string{"level=INFO", "rpm=0 rpm_from=none tpm=90000 tpm_from=LLM_ACCOUNT_TPM concurrency=0 concurrency_from=none",
				"process_concurrency=32 process_concurrency_from=LLM_MAX_CONCURRENCY",
				`process_rate_per_minute=0 process_rate_from="not set"`}, false},
		{"AWorkerWithNoLimitKnownSaysSo", nil,
			[]string{"rpm=0 rpm_from=none tpm=0 tpm_from=none concurrency=0 concurrency_from=none",
				`process_concurrency=8 process_concurrency_from="default while no limit of the account is known"`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t, nil, tc.env)
			delete(e.env, "LLM_RATE_PER_MINUTE")
			cfg, err := LoadConfig(e.environ())
			require.NoError(t, err)
			var logs lockedWriter
			m := NewMain(cfg, cli.RoleWorker, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
			m.TestOnly = true
			require.NoError(t, m.Run(context.Background()))
			e.mains = append(e.mains, m)
			lines := func(substr string) (out []string) {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, substr) {
						out = append(out, l)
					}
				}
				return out
			}
			limits := lines(`msg="model limits"`)
			require.Len(t, limits, 1, logs.String())
			for _, want := range tc.want {
				require.Contains(t, limits[0], want)
			}
			const unknown = "no limit of the model provider's account is known"
			ready := readyz(t, m.WorkerURL())
			if !tc.unknown {
				require.Empty(t, lines(unknown), logs.String())
				require.JSONEq(t, `{"status":"ok"}`, ready)
				return
			}
			warned := lines(unknown)
			require.Len(t, warned, 1, logs.String())
			require.Contains(t, warned[0], "level=WARN")
			require.Contains(t, warned[0], "at most 8 model calls in flight")
			var body struct{ Status, Detail string }
			require.NoError(t, json.Unmarshal([]byte(ready), &body))
			require.Equal(t, "ok", body.Status)
			require.Contains(t, body.Detail, unknown)
		})
	}

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
