package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// prometheusServer is a real Prometheus (Debian's package) scraping the
// test's processes every second and evaluating deploy/prometheus/alerts.yaml.
type prometheusServer struct {
	t   *testing.T
	url string
}

func startPrometheus(t *testing.T, targets ...string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus on this machine; `go tool task test` installs Debian's prometheus when run as root")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/alerts.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	var hosts []string
	for _, target := range targets {
		u, err := url.Parse(target)
		require.NoError(t, err)
		hosts = append(hosts, fmt.Sprintf("%q", u.Host))
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: domainclass
    static_configs:
      - targets: [%s]
`, rules, strings.Join(hosts, ", "))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p := &prometheusServer{t: t, url: "http://" + addr}
	require.Eventually(t, func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, dbtest.BudgetServer, 100*time.Millisecond, "Prometheus did not become ready within its time budget of %s (load average %s)",
		dbtest.BudgetServer, dbtest.LoadAverage())
	return p
}

// api GETs a Prometheus HTTP API path and returns its data; an error
// answer fails the test with Prometheus's own message.
func (p *prometheusServer) api(path string, query url.Values) json.RawMessage {
	p.t.Helper()
	resp, err := http.Get(p.url + path + "?" + query.Encode())
	require.NoError(p.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	var out struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	require.NoError(p.t, json.Unmarshal(body, &out), "%s", body)
	require.Equal(p.t, "success", out.Status, "%s %s: %s: %s", path, query.Encode(), out.ErrorType, out.Error)
	return out.Data
}

// query runs an instant query and returns each series' labels and value.
func (p *prometheusServer) query(expr string) []promSample {
	p.t.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	require.NoError(p.t, json.Unmarshal(p.api("/api/v1/query", url.Values{"query": {expr}}), &data))
	var out []promSample
	for _, r := range data.Result {
		var v float64
		_, _ = fmt.Sscan(fmt.Sprint(r.Value[1]), &v)
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out
}

type promSample struct {
	labels map[string]string
	value  float64
}

// TestPrometheus runs a real Prometheus against an api and a worker
// process while a job, a list and a webhook go through: the queue gauges
// arrive, every alert rule evaluates without error and stays quiet, and
// every query of the Grafana dashboard runs and names metrics that exist.
func TestPrometheus(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t)
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Makes snacks.") },
		map[string]string{"WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true"})
	e.tune = func(c *Config) { c.Queue.QueueMetricsInterval = time.Second }
	api := e.start(cli.RoleAPI)
	worker := e.start(cli.RoleWorker)
	prom := startPrometheus(t, api.APIURL(), worker.WorkerURL())

	status, body := e.post(`{"domains": ["acme.com", "beta.com"]}`, "X-Callback-URL", rc.srv.URL+"/hooks")
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var job jobView
	require.NoError(t, json.Unmarshal(body, &job))
	e.wait(job.JobID, "COMPLETED", dbtest.Patience())
	// A dispute and its verdict: the review gauges have a series.
	status, body = e.operatorCall("", "POST", "/domains/acme.com/disputes", `{"note": "Not a maker."}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	e.verdict("", e.reviewNext("").Item.ID, "yes")
	code, _, errOut := e.cli(context.Background(), "", []string{"DOMAINCLASS_URL=" + api.APIURL()},
		"submit", "--list", "--wait", "--poll", "100ms", "gamma.com", "acme.com")
	require.Equal(t, 0, code, errOut)
	require.Eventually(t, func() bool { return len(rc.forJob(job.JobID)) == 1 }, dbtest.Patience(), 10*time.Millisecond)

	// The queue gauges, from both processes.
	require.Eventually(t, func() bool {
		s := prom.query(`domainclass_queue_jobs{queue="classify",state="completed"}`)
		return len(s) == 2 && s[0].value >= 1 && s[1].value >= 1
	}, dbtest.Patience(), 250*time.Millisecond, "the classify job as completed, from the api and the worker")

	// Every rule evaluated, without error, and quiet on a healthy service.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name           string `json:"name"`
				Health         string `json:"health"`
				State          string `json:"state"`
				LastError      string `json:"lastError"`
				LastEvaluation string `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal(prom.api("/api/v1/rules", nil), &rules))
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" || strings.HasPrefix(r.LastEvaluation, "0001") {
					return false
				}
				n++
			}
		}
		return n > 0
	}, dbtest.Patience(), 250*time.Millisecond, "the rules' health: %+v", rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.Equal(t, "inactive", r.State, "%s on a healthy service", r.Name)
		}
	}

	// Every dashboard query runs, and every metric it names exists.
	raw, err := os.ReadFile("../../deploy/grafana/domainclass.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	var names []string
	require.NoError(t, json.Unmarshal(prom.api("/api/v1/label/__name__/values", nil), &names))
	metricName := regexp.MustCompile(`\bdomainclass_[a-z_]+`)
	queries := 0
	for _, panel := range dash.Panels {
		require.NotEmpty(t, panel.Targets, panel.Title)
		for _, target := range panel.Targets {
			expr := strings.ReplaceAll(target.Expr, "$__rate_interval", "1m")
			prom.query(expr) // fails the test on a query error
			queries++
			for _, name := range metricName.FindAllString(expr, -1) {
				require.True(t, slices.Contains(names, name), "panel %q: no metric %s in Prometheus", panel.Title, name)
			}
		}
	}
	require.GreaterOrEqual(t, queries, 10)
}
