package main

import (
	"context"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/evals"
)

// TestEval drives `domainclass eval` end to end through Run, against a
// loopback provider where good-model answers testdata/small.csv right and
// test-model misses two CPG domains.
func TestEval(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
		yes := strings.HasPrefix(req.Domain, "tp") || strings.HasPrefix(req.Domain, "fn") || strings.HasPrefix(req.Domain, "fail1")
		if req.Model == "test-model" && strings.HasPrefix(req.Domain, "fn") {
			return llmtest.Answer(false, 4, "Not a consumer brand.")
		}
		if req.Model == "test-model" && strings.HasPrefix(req.Domain, "fp") {
			return llmtest.Answer(true, 2, "Might sell its own brand.")
		}
		if req.Domain == "" {
			return llmtest.Status(http.StatusBadRequest, nil)
		}
		return llmtest.Answer(yes, 5, "Scripted.")
	})
	dir := t.TempDir()
	env := []string{
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + srv.BaseURL(), "OPENAI_MODEL=good-model",
		"SEARCH_PROVIDER=none", "LLM_RATE_PER_MINUTE=60000", "LOG_LEVEL=warn",
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Run(context.Background(), append([]string{"eval"}, args...), env, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	data := filepath.Join("..", "..", "evals", "testdata", "small.csv")
	cache, report := filepath.Join(dir, "cache"), filepath.Join(dir, "report")
	args := []string{"--data", data, "--models", "good-model,test-model", "--prompts", "v1,v2",
		"--concurrency", "3", "--cache", cache, "--out", report}

	// The gate: test-model misses fn1 and fn2 under both prompts; fn1's
	// label is doubtful, so the gate counts fn2 (and accuracy 8/10 on the
	// clear rows meets 0.8).
	code, out, errOut := run(append(args, "--max-fn", "0", "--min-accuracy", "0.8")...)
	require.Equal(t, 1, code, errOut)
	require.Equal(t, []string{
		"eval gate: test-model / v1 / none: 1 false negatives on clear rows > --max-fn 0 (fn2-example.com)",
		"eval gate: test-model / v2 / none: 1 false negatives on clear rows > --max-fn 0 (fn2-example.com)",
		"domainclass: eval gate failed: 2 of 4 candidates fell short (false negatives ≤ 0, accuracy ≥ 0.800)",
	}, lines(errOut, "eval gate", "domainclass:"), "one line per failing candidate, then the verdict")
	require.Contains(t, out, "11 domains (6 yes, 5 no, 1 doubtful) × 4 candidates × 1:")
	require.Contains(t, out, "| good-model / v1 / none | 11/11 | 1.000 | 0 | 0 | 1.000 | 1.000 | 1.000 | 0 | n/a |")
	require.Contains(t, out, "| test-model / v2 / none | 8/11 | 0.727 | 2 | 1 |")
	require.Contains(t, out, "report: "+filepath.Join(report, "report.md"))
	require.Contains(t, errOut, "eval: 44 answers to get", "plain progress lines when stderr is not a terminal")
	require.Contains(t, errOut, "eval: 44/44 answers (100%)")
	require.Equal(t, 44, srv.Total())
	// Both prompt versions reached the model.
	systems := map[string]bool{}
	for _, r := range srv.Requests() {
		systems[r.System] = true
	}
	require.Len(t, systems, 2)

	for _, name := range []string{"report.md", "report.json", "accuracy_vs_cost.png", "accuracy_vs_latency.png",
		"confusion-1-good-model-v1-none.png", "confusion-4-test-model-v2-none.png"} {
		require.FileExists(t, filepath.Join(report, name))
	}
	f, err := os.Open(filepath.Join(report, "confusion-4-test-model-v2-none.png"))
	require.NoError(t, err)
	_, err = png.Decode(f)
	f.Close()
	require.NoError(t, err)

	// A rerun without the gate passes and costs nothing.
	code, out, errOut = run(args...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 44, srv.Total(), "a rerun is answered from the cache")
	require.Contains(t, out, "| test-model / v1 / none | 8/11 | 0.727 | 2 | 1 |")
	md, err := os.ReadFile(filepath.Join(report, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "This run made 0 model calls and took 44 answers from the cache")
	require.Contains(t, string(md), "| candidate | dev, clear | test, clear | test, doubtful | gate (clear rows) |",
		"the report shows dev and test, clear and doubtful apart")
	require.Contains(t, string(md), "| test-model / v1 / none | 6/7 = 0.857 (1 FN) | 2/3 = 0.667 (0 FN) | 0/1 = 0.000 (1 FN) | 8/10 = 0.800, 1 FN |")

	// --split test runs the held-out rows only.
	code, out, errOut = run(append(args, "--split", "test")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "4 domains (2 yes, 2 no, 1 doubtful) × 4 candidates × 1:")
	code, _, errOut = run(append(args, "--split", "holdout")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `--split must be dev, test or all, got "holdout"`)
}

func TestEval_UsageAndConfigErrors(t *testing.T) {
	t.Parallel()
	data := filepath.Join("..", "..", "evals", "testdata", "small.csv")
	env := []string{"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=http://127.0.0.1:1/v1"}
	run := func(env []string, args ...string) (int, string) {
		var out, errOut strings.Builder
		code := Run(context.Background(), append([]string{"eval"}, args...), env, nil, &out, &errOut)
		return code, errOut.String()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "eval needs --data FILE.csv"},
		{[]string{"--data", data, "--repeat", "0"}, "--repeat must be at least 1"},
		{[]string{"--data", data, "--prompts", "v1,v9"}, `classifier "cpg" has no prompt version "v9"`},
		{[]string{"--data", data, "--search", "google"}, `unknown search provider "google"`},
		{[]string{"--data", data, "--min-accuracy", "95"}, "--min-accuracy must be between 0 and 1"},
		{[]string{"--data", data, "--classifier", "b2b"}, `unknown classifier "b2b"`},
		{[]string{"--data", data, "extra"}, "eval takes no arguments"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
	} {
		code, errOut := run(env, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want)
	}

	code, errOut := run(nil, "--data", data)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one clear line: %q", errOut)
	require.Contains(t, errOut, "eval needs a model: set OPENAI_API_KEY")

	code, errOut = run(env, "--data", "no-such.csv")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot open the data set")

	var out strings.Builder
	require.Equal(t, 0, Run(context.Background(), []string{"eval", "--help"}, env, nil, &out, &out))
	require.Contains(t, out.String(), "Usage:\n  domainclass eval --data FILE.csv")
	require.Contains(t, out.String(), "gate: most false negatives allowed per candidate", "--help lists the flags")
}

// lines returns the lines of s that start with one of the prefixes.
func lines(s string, prefixes ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// TestEval_SecondClassifier: the b2b_software data set runs through
// `domainclass eval --classifier b2b_software`, its prompt reaching the
// model and its answer field read back, scored against its labels.
func TestEval_SecondClassifier(t *testing.T) {
	t.Parallel()
	data := filepath.Join("..", "..", "evals", "b2b_software.csv")
	cases, err := evals.LoadCases(data, "is_b2b_software")
	require.NoError(t, err)
	labels := map[string]bool{}
	for _, c := range cases {
		labels[c.Domain] = c.Label
	}
	srv := llmtest.New(t, func(req llmtest.Request) llmtest.Reply {
		if !strings.Contains(req.System, `{"is_b2b_software": true or false`) {
			return llmtest.AnswerAs("is_cpg", true, 5, "Asked the wrong question.")
		}
		return llmtest.AnswerAs("is_b2b_software", labels[req.Domain], 5, "Scripted from the label.")
	})
	dir := t.TempDir()
	env := []string{
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + srv.BaseURL(), "OPENAI_MODEL=good-model",
		"SEARCH_PROVIDER=none", "LLM_RATE_PER_MINUTE=60000", "LOG_LEVEL=warn",
	}
	var out, errOut strings.Builder
	code := Run(context.Background(), []string{"eval", "--classifier", "b2b_software", "--data", data, "--split", "test",
		"--cache", filepath.Join(dir, "cache"), "--out", filepath.Join(dir, "report"), "--min-accuracy", "1"},
		env, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	test := 0
	for _, c := range cases {
		if c.Split == evals.SplitTest {
			test++
		}
	}
	require.Contains(t, out.String(), fmt.Sprintf("| good-model / v1 / none | %d/%d | 1.000 |", test, test))
	require.Equal(t, test, srv.Total())
}
