package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/evals"
)

// reviewTruth is the test's labels of the domains dNNN.com: yes for an even
// NNN. wrongModel answers them right but for every tenth (NNN a multiple of
// 10), which it answers wrong: 10% wrong, whatever the sample.
func reviewTruth(domain string) bool {
	var n int
	_, _ = fmt.Sscanf(domain, "d%03d.com", &n)
	return n%2 == 0
}

func wrongModel(r llmtest.Request) llmtest.Reply {
	var n int
	if _, err := fmt.Sscanf(r.Domain, "d%03d.com", &n); err != nil {
		return llmtest.Answer(true, 5, "Makes things.")
	}
	answer := reviewTruth(r.Domain)
	if n%10 == 0 {
		answer = !answer
	}
	return llmtest.Answer(answer, 5, "Scripted.")
}

// operatorCall sends a request to the api's operator routes (and others)
// with Basic credentials user:password ("" for none) and returns the
// status and body.
func (e *e2e) operatorCall(auth, method, path, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.api.APIURL()+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		req.SetBasicAuth(user, pass)
	} else if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, b
}

type reviewNextView struct {
	Queued, Reviewed int
	Item             *struct {
		ID      int64
		Domain  string
		Answer  bool
		Reasons []string
	}
}

func (e *e2e) reviewNext(auth string) reviewNextView {
	e.t.Helper()
	status, body := e.operatorCall(auth, "GET", "/review/next?classifier=cpg", "")
	require.Equal(e.t, http.StatusOK, status, "%s", body)
	var v reviewNextView
	require.NoError(e.t, json.Unmarshal(body, &v))
	return v
}

func (e *e2e) verdict(auth string, id int64, verdict string) {
	e.t.Helper()
	status, body := e.operatorCall(auth, "POST", fmt.Sprintf("/review/items/%d/verdict", id), `{"verdict": "`+verdict+`"}`)
	require.Equal(e.t, http.StatusOK, status, "%s", body)
}

type reviewStatsView struct {
	Stats []struct {
		Classifier, Model string
		PromptVersion     string `json:"prompt_version"`
		Audit             struct {
			Reviewed, Agreed     int
			Agreement, Low, High *float64
		}
		Queues []struct {
			Queue            string
			Reviewed, Agreed int
		}
	}
}

// TestReview drives the review end to end on the real binary's Main: a
// caller's dispute is queued at once and its verdict answers the next job;
// a model with a known error rate (10% wrong) is measured on an audit
// sample of every confident answer, and the interval of its agreement
// holds 0.90; the verdicts exported round-trip through `domainclass eval`.
func TestReview(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newE2E(t, wrongModel, nil)
	e.start(cli.RoleAll)
	client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}

	// A dispute is in the queue within a second, first in line; the
	// verdict on it answers the next job.
	e.wait(e.submit("disputed.com"), "COMPLETED", dbtest.Patience())
	start := time.Now()
	status, body := e.operatorCall("", "POST", "/domains/disputed.com/disputes", `{"classifier": "cpg", "note": "A software firm."}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	next := e.reviewNext("")
	require.Less(t, time.Since(start), time.Second, "the dispute is queued by the request")
	require.Equal(t, "disputed.com", next.Item.Domain)
	require.Contains(t, next.Item.Reasons, "disputed")
	e.verdict("", next.Item.ID, "no")
	job := e.wait(e.submit("disputed.com"), "COMPLETED", dbtest.Patience())
	require.Equal(t, "override", job.Results[0].Source, "the verdict answers the next job")
	require.False(t, *job.Results[0].IsCPG)

	// Every confident answer audited, then 200 answers through a list.
	code, out, errOut := e.cli(ctx, "", nil, "review", "rules", "--classifier", "cpg", "--low-confidence", "0", "--audit-rate", "1", "--by", "test")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "cpg now queues answers of confidence ≤ 0 and 100% of the others as the audit sample")
	code, _, errOut = e.cli(ctx, "", nil, "review", "rules", "--audit-rate", "2")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--audit-rate must be 0 to 1")
	code, _, errOut = e.cli(ctx, "", nil, "review", "rules", "--classifier", "nope")
	require.Equal(t, 2, code, errOut)
	status, body = e.operatorCall("", "GET", "/review/rules?classifier=cpg", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"audit_rate":1`)
	domains := make([]string, 200)
	for i := range domains {
		domains[i] = fmt.Sprintf("d%03d.com", i)
	}
	code, _, errOut = e.cli(ctx, "", client, append([]string{"submit", "--list", "--wait", "--poll", "100ms"}, domains...)...)
	require.Equal(t, 0, code, errOut)

	// The reviewers' truth is the test's labels.
	reviewed := 0
	for {
		q := e.reviewNext("")
		if q.Item == nil {
			break
		}
		require.Equal(t, []string{"audit"}, q.Item.Reasons, q.Item.Domain)
		e.verdict("", q.Item.ID, yesNo(reviewTruth(q.Item.Domain)))
		reviewed++
	}
	require.Equal(t, 200, reviewed)

	status, body = e.operatorCall("", "GET", "/review/stats?classifier=cpg", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var stats reviewStatsView
	require.NoError(t, json.Unmarshal(body, &stats))
	require.Len(t, stats.Stats, 1, "one model and prompt version")
	row := stats.Stats[0]
	require.Equal(t, "test-model", row.Model)
	require.Equal(t, e.currentPrompt(), row.PromptVersion)
	require.Equal(t, 200, row.Audit.Reviewed)
	require.Equal(t, 180, row.Audit.Agreed)
	require.InDelta(t, 0.90, *row.Audit.Agreement, 1e-9)
	require.Less(t, *row.Audit.Low, 0.90)
	require.Greater(t, *row.Audit.High, 0.90)
	require.InDelta(t, 0.8506, *row.Audit.Low, 0.0001, "the Wilson interval of 180/200")
	require.InDelta(t, 0.9343, *row.Audit.High, 0.0001)
	metrics := scrape(t, e.api.APIURL())
	labels := fmt.Sprintf(`classifier="cpg",model="test-model",prompt_version=%q,queue="audit"`, e.currentPrompt())
	require.Contains(t, metrics, "domainclass_review_agreement{"+labels+"} 0.9\n")
	require.Contains(t, metrics, "domainclass_review_reviewed{"+labels+"} 200\n")
	require.Contains(t, metrics, `domainclass_review_queued{classifier="cpg"} 0`)

	// review export → eval: the reviewed rows are the scorer's cases.
	dir := t.TempDir()
	data := filepath.Join(dir, "reviewed.csv")
	code, _, errOut = e.cli(ctx, "", nil, "review", "export", "--classifier", "cpg", "--out", data)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "review export: 201 reviewed answers of cpg added, 201 rows in all")
	cases, err := evals.LoadCases(data, "is_cpg")
	require.NoError(t, err)
	require.Len(t, cases, 201)
	splits := map[string]int{}
	for _, c := range cases {
		splits[c.Split]++
		require.Equal(t, "review", c.Kind)
	}
	require.Equal(t, map[string]int{"test": 60, "dev": 141}, splits, "30% test, by the data sets' own rule")
	// Exported again: every row keeps its split (and nothing is added).
	before, err := os.ReadFile(data)
	require.NoError(t, err)
	code, _, errOut = e.cli(ctx, "", nil, "review", "export", "--classifier", "cpg", "--out", data)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "review export: 0 reviewed answers of cpg added, 201 rows in all")
	after, err := os.ReadFile(data)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))

	report := filepath.Join(dir, "report")
	code, _, errOut = e.cli(ctx, "", nil, "eval", "--data", data, "--models", "test-model", "--concurrency", "4",
		"--cache", filepath.Join(dir, "cache"), "--out", report)
	require.Equal(t, 0, code, errOut)
	raw, err := os.ReadFile(filepath.Join(report, "report.json"))
	require.NoError(t, err)
	var rep struct {
		Cases  int
		Scores []struct {
			Total, Correct int
			FalseNegatives []struct{ Domain string } `json:"false_negatives"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &rep))
	require.Equal(t, 201, rep.Cases)
	require.Equal(t, 180, rep.Scores[0].Correct, "the 20 the model gets wrong, and disputed.com")
	var missed []string
	for _, m := range rep.Scores[0].FalseNegatives {
		missed = append(missed, m.Domain)
	}
	require.Len(t, missed, 20, "d000, d010, …, d190: yes by the reviewers, no by the model")
	require.Contains(t, missed, "d010.com")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
