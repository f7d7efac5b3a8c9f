//go:build drills

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// The shared-capacity and budget drills (issue 24): worker processes of the binary, as
// an autoscaler starts them (every one on the same settings, each allowed
// the whole account), against a fake provider that enforces one account's
// requests and tokens a minute with OpenAI's 429s and headers.
//
// Knobs: DRILL_SCALE_DOMAINS (the 1 → 4 → 1 drain, default 20000),
// DRILL_SCALE_RPM (default 2400), DRILL_TPM_DOMAINS (default 12000),
// DRILL_TPM (default 1200000 tokens a minute, which binds below the RPM
// with the drill's long prompts), DRILL_LLM_LATENCY (default 300ms).

// scaleAccount is the account of a scale drill.
type scaleAccount struct {
	rpm, tpm int
	domains  int
	latency  time.Duration
	// search, when set, is a fake Brave search whose long results make
	// long prompts.
	search bool
}

// drillScaleRequests: one 20k-domain list drains while the workers go
// 1 → 4 → 1; the account's requests a minute bind.
func drillScaleRequests(t *testing.T, s *drillSet) {
	a := scaleAccount{rpm: envInt("DRILL_SCALE_RPM", 2400), domains: envInt("DRILL_SCALE_DOMAINS", 20000),
		latency: envDuration("DRILL_LLM_LATENCY", 300*time.Millisecond)}
	drillScale(t, s, "1 → 4 → 1 workers, RPM binds", a)
}

// drillScaleTokens: the same with long prompts, so that the account's
// tokens a minute bind first.
func drillScaleTokens(t *testing.T, s *drillSet) {
	a := scaleAccount{rpm: envInt("DRILL_SCALE_RPM", 2400), tpm: envInt("DRILL_TPM", 1_200_000),
		domains: envInt("DRILL_TPM_DOMAINS", 12000), latency: envDuration("DRILL_LLM_LATENCY", 300*time.Millisecond), search: true}
	drillScale(t, s, "1 → 4 → 1 workers, TPM binds", a)
}

func drillScale(t *testing.T, s *drillSet, drill string, a scaleAccount) {
	fake := llmtest.New(t, llmtest.Sized(llmtest.Steady(true, 4, "Makes packaged food.", a.latency)))
	fake.SetAccount(llmtest.Account{RPM: a.rpm, TPM: a.tpm, Window: time.Second})
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), scaleSettings(t, a))
	d.start(cli.RoleAPI)
	workers := []*binProc{d.start(cli.RoleWorker)}

	domains := make([]string, a.domains)
	for i := range domains {
		domains[i] = fmt.Sprintf("scale%06d.com", i)
	}
	status, acc, err := d.uploadList(bytes.NewReader(gzipList(domains)))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	done := func() int { l, _ := d.listStatus(acc.ListID); return l.Progress.Done }

	var phases [3][2]time.Time
	require.True(t, eventually(10*time.Minute, func() bool { return done() > 0 }))
	phases[0][0] = time.Now()
	require.True(t, eventually(time.Hour, func() bool { return done() >= a.domains/3 }))
	phases[0][1] = time.Now()
	for range 3 {
		workers = append(workers, d.start(cli.RoleWorker))
	}
	phases[1][0] = time.Now()
	require.True(t, eventually(time.Hour, func() bool { return done() >= 2*a.domains/3 }))
	phases[1][1] = time.Now()
	for _, w := range workers[1:] {
		w.term() // as an autoscaler scales down: SIGTERM, and the soft stop
	}
	phases[2][0] = time.Now()
	completed := d.waitListCompleted(acc.ListID) || eventually(time.Hour, func() bool { l, _ := d.listStatus(acc.ListID); return l.Status == "COMPLETED" })
	phases[2][1] = time.Now()
	outcomes := d.listOutcomes(acc.ListID)

	times, tokens := fake.AnsweredTimes()
	answered := len(times)
	throttled := fake.Throttled()
	twice := 0
	for _, domain := range domains {
		if fake.Answered(domain) != 1 {
			twice++
		}
	}
	s.check(t, drill, "list COMPLETED; rows COMPLETED (DB)", "every row", completed && outcomes["COMPLETED"] == a.domains,
		"%d of %d (%v)", outcomes["COMPLETED"], a.domains, outcomes)
	s.check(t, drill, "provider 429s", "≤ 1% of calls", throttled*100 <= answered+throttled,
		"%d of %d requests (%.2f%%)", throttled, answered+throttled, 100*float64(throttled)/float64(max(answered+throttled, 1)))
	s.check(t, drill, "model calls per distinct domain", "1.00", answered == a.domains && twice == 0,
		"%s (%d calls, %d domains; %d not exactly once)", ratio(answered, a.domains), answered, a.domains, twice)
	if twice > 0 {
		s.figure(drill, "when the domains asked twice were asked again", "%s", againWhen(fake, phases))
	}
	limit, unit := float64(a.rpm)/60, "requests/s"
	if a.tpm > 0 {
		limit, unit = float64(a.tpm)/60, "tokens/s"
	}
	for i, name := range []string{"1 worker", "4 workers", "1 worker again"} {
		rate := phaseRate(times, tokens, a.tpm > 0, phases[i][0].Add(5*time.Second), phases[i][1])
		s.check(t, drill, fmt.Sprintf("%s (after 5 s to settle): %s ÷ the account's", name, unit), "≥ 90%",
			rate >= 0.9*limit, "%.0f%% (%.1f of %.1f; %s)", 100*rate/limit, rate, limit, phases[i][1].Sub(phases[i][0]).Round(time.Second))
	}
	if a.tpm > 0 && answered > 0 {
		sum := 0
		for _, n := range tokens {
			sum += n
		}
		s.figure(drill, "tokens per call; requests/s ÷ the RPM", "%d; %.0f%% (the TPM binds first)", sum/answered,
			100*float64(answered)/phases[2][1].Sub(phases[0][0]).Seconds()/(float64(a.rpm)/60))
	}
}

// scaleSettings are every worker's settings: the account's limits once,
// and per-process caps that let one process use the whole account.
func scaleSettings(t *testing.T, a scaleAccount) map[string]string {
	slots := max(16, int(2*float64(a.rpm)/60*a.latency.Seconds())+1)
	env := map[string]string{
		"LLM_ACCOUNT_RPM": strconv.Itoa(a.rpm), "LLM_MAX_CONCURRENCY": strconv.Itoa(slots),
		"LIST_DOMAIN_CONCURRENCY": strconv.Itoa(slots), "LOG_LEVEL": "warn", "SOFT_STOP_TIMEOUT": "25s",
	}
	if a.tpm > 0 {
		env["LLM_ACCOUNT_TPM"] = strconv.Itoa(a.tpm)
	}
	if a.search {
		brave := longSearch(t)
		env["SEARCH_PROVIDER"], env["BRAVE_API_KEY"], env["BRAVE_BASE_URL"] = "brave", "drill", brave.URL
	}
	return env
}

// againWhen says in which phase each second answer of a domain came.
func againWhen(fake *llmtest.Server, phases [3][2]time.Time) string {
	seen := map[string]bool{}
	counts := map[string]int{}
	at, _ := fake.AnsweredTimes()
	for i, d := range fake.AnsweredDomains() {
		if seen[d] {
			phase := "after the drain"
			for p, name := range []string{"1 worker", "4 workers", "1 worker again"} {
				if !at[i].After(phases[p][1]) {
					phase = name
					break
				}
			}
			counts[phase]++
		}
		seen[d] = true
	}
	return fmt.Sprint(counts)
}

// phaseRate is the answers (or their tokens) a second between from and to.
func phaseRate(times []time.Time, tokens []int, byTokens bool, from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	n := 0
	for i, at := range times {
		if at.After(from) && !at.After(to) {
			if byTokens {
				n += tokens[i]
			} else {
				n++
			}
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// term sends SIGTERM and waits for the process to stop.
func (p *binProc) term() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	})
}

// drillBudgetWorkerKilled: of three workers draining a list at the
// account's limit, one is killed with SIGKILL while it holds its share;
// the others are back at the account's limit once its lease expires.
func drillBudgetWorkerKilled(t *testing.T, s *drillSet) {
	const drill = "worker kill -9 holding its share"
	a := scaleAccount{rpm: envInt("DRILL_SCALE_RPM", 2400), latency: envDuration("DRILL_LLM_LATENCY", 300*time.Millisecond)}
	rows := a.rpm / 60 * 90 // a minute and a half of work
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", a.latency))
	fake.SetAccount(llmtest.Account{RPM: a.rpm, Window: time.Second})
	settings := scaleSettings(t, a)
	// The killed worker's chunks come back within seconds, so that the list
	// ends (its calls in flight wait up to their JOB_TIMEOUT in the others'
	// scheduler queues: a minute).
	settings["JOB_TIMEOUT"], settings["RESCUE_STUCK_AFTER"] = "60s", "60s"
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), settings)
	d.start(cli.RoleAPI)
	var workers []*binProc
	for range 3 {
		workers = append(workers, d.start(cli.RoleWorker))
	}
	domains := make([]string, rows)
	for i := range domains {
		domains[i] = fmt.Sprintf("held%05d.com", i)
	}
	status, acc, err := d.uploadList(bytes.NewReader(gzipList(domains)))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	require.True(t, eventually(5*time.Minute, func() bool { l, _ := d.listStatus(acc.ListID); return l.Progress.Done >= rows/4 }))
	// The worker holding the largest share is killed: one whose chunks had
	// all ended held none, and its death proved nothing (13:33 UTC run of
	// 2026-12-02: "0s, it held 0%").
	victim, share := workers[0], -1
	for _, w := range workers {
		held := d.count(fmt.Sprintf(`SELECT coalesce(max(share * 100), -1)::int FROM llm_lease WHERE holder LIKE '%%/%d/%%'`, w.cmd.Process.Pid))
		if held > share {
			victim, share = w, held
		}
	}
	victim.kill()
	killed := time.Now()
	limit := float64(a.rpm) / 60
	back := time.Duration(-1)
	eventually(30*time.Second, func() bool {
		times, _ := fake.AnsweredTimes()
		// The first second after which two seconds run at ≥ 90% of the limit.
		for at := killed; at.Add(2 * time.Second).Before(time.Now()); at = at.Add(100 * time.Millisecond) {
			if phaseRate(times, nil, false, at, at.Add(2*time.Second)) >= 0.9*limit {
				back = at.Sub(killed)
				return true
			}
		}
		return false
	})
	completed := d.waitListCompleted(acc.ListID)
	s.check(t, drill, "kill → the others at ≥ 90% of the account's requests/s (2 s windows)", "≤ 10 s",
		share > 0 && back >= 0 && back <= 10*time.Second, "%s (it held %d%% of the account; leases expire after 3 s)",
		back.Round(100*time.Millisecond), share)
	s.check(t, drill, "list COMPLETED", "yes", completed, "%v", completed)
	s.figure(drill, "provider 429s", "%d", fake.Throttled())
}

// drillCallerAtBudget: two callers' lists drain at once; one caller's
// daily budget is spent partway. It makes no more model calls, its rows
// left end FAILED with the reason; the other's list is not affected.
func drillCallerAtBudget(t *testing.T, s *drillSet) {
	const (
		drill  = "caller at its budget"
		budget = 300
		rows   = 1000
	)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", 100*time.Millisecond))
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), map[string]string{"AUTH": "on"})
	keyA, keyB := d.createKey("team-a"), d.createKey("team-b")
	out, err := d.run("apikey", "limits", "team-a", "--model-calls-per-day", strconv.Itoa(budget))
	require.NoError(t, err, out)
	d.start(cli.RoleAPI)
	d.start(cli.RoleWorker)
	d.start(cli.RoleWorker)

	list := func(key, prefix, query string) string {
		var b strings.Builder
		for i := range rows {
			fmt.Fprintf(&b, "%s%04d.com\n", prefix, i)
		}
		req, _ := http.NewRequest(http.MethodPost, d.api.URL+"/lists?"+query, strings.NewReader(b.String()))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := d.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
		var acc struct {
			ListID string `json:"list_id"`
		}
		require.NoError(t, json.Unmarshal(body, &acc))
		return acc.ListID
	}
	la, lb := list(keyA, "budget-a", "over_budget=run_partly"), list(keyB, "budget-b", "")
	ended := eventually(5*time.Minute, func() bool {
		return d.count(fmt.Sprintf(`SELECT count(*) FROM list WHERE id IN ('%s', '%s') AND status = 'COMPLETED'`, la, lb)) == 2
	})
	callsOf := func(prefix string) int {
		n := 0
		for domain, c := range fake.Domains() {
			if strings.HasPrefix(domain, prefix) {
				n += c
			}
		}
		return n
	}
	a, b := d.listOutcomes(la), d.listOutcomes(lb)
	reason := d.count(fmt.Sprintf(`SELECT count(*) FROM list_row WHERE list_id = '%s' AND status = 'FAILED' AND error LIKE '%%daily model budget is spent%%'`, la))
	calls := callsOf("budget-a")
	s.check(t, drill, "the caller's model calls", fmt.Sprintf("≤ its budget (%d), none after", budget),
		ended && calls <= budget && calls >= budget*9/10, "%d (budget %d)", calls, budget)
	s.check(t, drill, "its rows left when the budget was spent", "FAILED, saying the budget is spent",
		reason > 0 && reason == rows-a["COMPLETED"], "%d FAILED with the reason, %v", reason, a)
	s.check(t, drill, "the other caller's list", "every row COMPLETED", b["COMPLETED"] == rows,
		"%v (%d model calls)", b, callsOf("budget-b"))
}

// createKey creates an API key with the binary and returns it.
func (d *deployment) createKey(name string) string {
	d.t.Helper()
	out, err := d.run("apikey", "create", name)
	require.NoError(d.t, err, out)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "dc_") {
			return strings.TrimSpace(line)
		}
	}
	d.t.Fatalf("no key in: %s", out)
	return ""
}
