package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/spend"
	"github.com/domainclass/domainclass/wire"
)

// as is a caller of e's API with its own key.
type as struct {
	e   *e2e
	key string
}

func (a as) do(method, path, contentType, body string) (int, []byte) {
	a.e.t.Helper()
	req, err := http.NewRequest(method, a.e.api.APIURL()+path, strings.NewReader(body))
	require.NoError(a.e.t, err)
	req.Header.Set("Authorization", "Bearer "+a.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.e.t, err)
	return resp.StatusCode, b
}

// list sends domains as a text/plain list with query, and returns the
// status and the list's id (when accepted) or the problem.
func (a as) list(query string, domains []string) (int, string, wire.Problem) {
	a.e.t.Helper()
	status, b := a.do(http.MethodPost, "/lists?"+query, "text/plain", strings.Join(domains, "\n"))
	var acc wire.ListAccepted
	var p wire.Problem
	if status == http.StatusAccepted {
		require.NoError(a.e.t, json.Unmarshal(b, &acc))
	} else {
		require.NoError(a.e.t, json.Unmarshal(b, &p), "%s", b)
	}
	return status, acc.ListID, p
}

func (a as) waitList(id string) wire.ListStatus {
	a.e.t.Helper()
	var s wire.ListStatus
	require.Eventually(a.e.t, func() bool {
		status, b := a.do(http.MethodGet, "/lists/"+id, "", "")
		require.Equal(a.e.t, http.StatusOK, status, "%s", b)
		require.NoError(a.e.t, json.Unmarshal(b, &s))
		return s.Status == "COMPLETED"
	}, dbtest.Patience(), 25*time.Millisecond, "list %s did not complete: %+v", id, s)
	return s
}

func (a as) job(body string) wire.JobReport {
	a.e.t.Helper()
	status, b := a.do(http.MethodPost, "/domains/classify", "application/json", body)
	require.Equal(a.e.t, http.StatusAccepted, status, "%s", b)
	var acc wire.Accepted
	require.NoError(a.e.t, json.Unmarshal(b, &acc))
	var r wire.JobReport
	require.Eventually(a.e.t, func() bool {
		_, b := a.do(http.MethodGet, "/domains/classify/"+acc.JobID, "", "")
		require.NoError(a.e.t, json.Unmarshal(b, &r))
		return r.Status == "COMPLETED"
	}, dbtest.Patience(), 25*time.Millisecond)
	return r
}

func (a as) me() wire.CallerReport {
	a.e.t.Helper()
	status, b := a.do(http.MethodGet, "/callers/me", "", "")
	require.Equal(a.e.t, http.StatusOK, status, "%s", b)
	var r wire.CallerReport
	require.NoError(a.e.t, json.Unmarshal(b, &r))
	return r
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d.com", prefix, i)
	}
	return out
}

func TestCallerBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// Issue 22, item 7: the same 100 domains as a list, then refreshed
	// twice, then with max_age=1s, then in twelve refresh jobs, made 502
	// model calls, every request 202, with nothing to bound one caller's
	// spend. With a budget of 150 calls a day the caller makes 150, and is
	// told why at each step; another caller is not affected.
	t.Run("BoundsACallersPaidCalls", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"AUTH": "on", "CALLER_MAX_ACTIVE_LISTS": "10"})
		e.tune = func(c *Config) { c.Queue.QueueMetricsInterval = 100 * time.Millisecond }
		e.start(cli.RoleAll)
		a, b := as{e, e.apiKey("team-a")}, as{e, e.apiKey("team-b")}
		code, out, errOut := e.cli(ctx, "", nil, "apikey", "limits", "team-a", "--model-calls-per-day", "150")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, `API key "team-a": 150 model calls a day, no limit a day (UTC).`)

		domains := numbered("same", 100)
		status, id, p := a.list("", domains)
		require.Equal(t, http.StatusAccepted, status, p.Detail)
		require.Equal(t, 100, a.waitList(id).Progress.Completed)

		// Once its answers are over a second old, max_age=1s asks for all 100.
		require.Eventually(t, func() bool {
			status, b := a.do(http.MethodPost, "/lists?max_age=1s&dry_run=true", "text/plain", strings.Join(domains, "\n"))
			var est wire.ListEstimate
			return status == http.StatusOK && json.Unmarshal(b, &est) == nil && est.ModelCalls == 100
		}, dbtest.Patience(), 50*time.Millisecond)
		for _, q := range []string{"refresh=true", "refresh=true", "max_age=1s"} {
			status, _, p = a.list(q, domains)
			require.Equal(t, http.StatusTooManyRequests, status, "%s: the list needs 100 calls, 50 are left", q)
			require.Equal(t, "/problems/budget-exceeded", p.Type)
			require.Contains(t, p.Detail, "needs an estimated 100 model calls")
			require.Contains(t, p.Detail, "has 50 model calls left")
		}
		var failed int
		for j := range 12 {
			body, _ := json.Marshal(map[string]any{"domains": domains[j*8 : j*8+10], "refresh": true})
			r := a.job(string(body))
			for _, d := range r.Results {
				if d.Status == "FAILED" {
					require.Equal(t, spend.SpentReason, d.Error)
					failed++
				}
			}
		}
		require.Equal(t, 120-50, failed, "the first 50 of the jobs' domains were asked again; the rest failed")
		require.Equal(t, 150, e.llm.Total(), "model calls of team-a's 100-domain list, refreshes and jobs")

		me := a.me()
		require.Equal(t, 150, me.Usage.ModelCalls)
		require.Equal(t, 0, *me.Remaining.ModelCalls)
		require.Equal(t, 150, *me.Budget.ModelCalls)
		require.Nil(t, me.Budget.CostUSD)
		require.Equal(t, httpapi.DefaultCallerMaxStoredRows, me.Limits.MaxStoredRows, "the caller's limits are all shown")
		require.Equal(t, httpapi.DefaultCallerMaxUploads, me.Limits.MaxUploads)
		require.Equal(t, httpapi.DefaultCallerMaxDownloads, me.Limits.MaxDownloads)

		r := b.job(`{"domains": ["other1.com", "other2.com"]}`)
		require.Equal(t, "COMPLETED", string(r.Results[0].Status), "team-b has no budget: its calls go on")
		require.Equal(t, 152, e.llm.Total())
		require.Equal(t, 2, b.me().Usage.ModelCalls)
		require.Nil(t, b.me().Remaining.ModelCalls)

		// Operators see it too, with a bounded set of callers.
		require.Eventually(t, func() bool {
			page := scrape(t, e.api.APIURL())
			return metric(t, page, `domainclass_caller_model_calls_today{caller="team-a"}`) == 150 &&
				metric(t, page, `domainclass_caller_model_calls_today{caller="team-b"}`) == 2 &&
				strings.Contains(page, `domainclass_caller_spend_usd_today{caller="(others)"} 0`)
		}, dbtest.Patience(), 50*time.Millisecond)
	})

	// A list sent with ?over_budget=run_partly runs until the budget is spent; its
	// other rows end FAILED with the reason, and the list completes.
	t.Run("PartialListRunsUpToTheBudget", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"AUTH": "on"})
		e.start(cli.RoleAll)
		a := as{e, e.apiKey("team-a")}
		code, _, errOut := e.cli(ctx, "", nil, "apikey", "limits", "team-a", "--model-calls-per-day", "30")
		require.Equal(t, 0, code, errOut)
		status, _, p := a.list("", numbered("part", 50))
		require.Equal(t, http.StatusUnprocessableEntity, status, "50 calls never fit a budget of 30 a day: not a 429 to retry")
		require.Equal(t, "/problems/list-exceeds-budget", p.Type)
		require.Contains(t, p.Detail, "?over_budget=run_partly")
		status, id, p := a.list("over_budget=run_partly", numbered("part", 50))
		require.Equal(t, http.StatusAccepted, status, p.Detail)
		s := a.waitList(id)
		require.Equal(t, 30, s.Progress.Completed)
		require.Equal(t, 20, s.Progress.Failed)
		require.Equal(t, 30, e.llm.Total())
		status, b := a.do(http.MethodGet, "/lists/"+id+"/results?status=FAILED", "", "")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(b), spend.SpentReason)
	})

	// A spend budget is priced with the dry run's table, and bounds what a
	// caller's calls cost.
	t.Run("SpendBudgetInDollars", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "x") },
			map[string]string{"AUTH": "on", "OPENAI_MODEL": "gpt-5.4-mini"})
		e.start(cli.RoleAll)
		a := as{e, e.apiKey("team-a")}
		// A call is 120 prompt and 25 completion tokens: $0.0002025.
		code, _, errOut := e.cli(ctx, "", nil, "apikey", "limits", "team-a", "--spend-per-day-usd", "0.002")
		require.Equal(t, 0, code, errOut)
		status, id, p := a.list("over_budget=run_partly", numbered("usd", 30))
		require.Equal(t, http.StatusAccepted, status, p.Detail)
		s := a.waitList(id)
		require.Positive(t, s.Progress.Completed)
		require.LessOrEqual(t, e.llm.Total(), 9, "$0.002 buys 9 calls of $0.0002025")
		me := a.me()
		require.LessOrEqual(t, me.Usage.CostUSD, 0.002)
		require.Equal(t, e.llm.Total(), me.Usage.ModelCalls)
	})

	t.Run("LimitsCommandKeepsWhatItIsNotGiven", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"AUTH": "on"})
		e.apiKey("team-a")
		run := func(args ...string) string {
			code, out, errOut := e.cli(ctx, "", nil, append([]string{"apikey"}, args...)...)
			require.Equal(t, 0, code, errOut)
			return out
		}
		run("limits", "team-a", "--rate-per-minute", "7")
		run("limits", "team-a", "--spend-per-day-usd", "2.5")
		require.Contains(t, run("limits", "team-a", "--model-calls-per-day", "40"),
			`API key "team-a": 40 model calls a day, $2.5 a day (UTC).`)
		list := run("list")
		require.Regexp(t, `team-a .* 7 .* 40 +\$2\.5`, list, "the rate stays 7 when only the budget changes")
		code, _, errOut := e.cli(ctx, "", nil, "apikey", "limits", "team-a", "--model-calls-per-day", "-1")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "must not be negative")
		code, _, errOut = e.cli(ctx, "", nil, "apikey", "limits", "nobody", "--model-calls-per-day", "1")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `no API key named "nobody"`)
	})
}
