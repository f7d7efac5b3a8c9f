package evals_test

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/evals"
)

// fixedResults is a run built by hand: four domains, two candidates, whose
// latencies and tokens are known.
func fixedResults() *evals.Results {
	cases := []evals.Case{
		{Domain: "a.com", Label: true, Kind: "cpg", Rationale: "r", Split: "dev"},
		{Domain: "b.com", Label: true, Kind: "cpg", Rationale: "r", Doubtful: true, Split: "test"},
		{Domain: "c.com", Label: false, Kind: "retailer", Rationale: "r", Split: "test"},
		{Domain: "d.com", Label: false, Kind: "retailer", Rationale: "r", Split: "dev"},
	}
	yes := func(d string, conf int, ms float64) evals.Answer {
		return evals.Answer{Domain: d, Sample: 1, Status: classifier.StatusCompleted, Answer: true, Confidence: conf,
			Reasoning: "yes", Called: true, LatencyMS: ms, PromptTokens: 1000, CompletionTokens: 100}
	}
	no := func(d string, conf int, ms float64) evals.Answer {
		a := yes(d, conf, ms)
		a.Answer, a.Reasoning = false, "no"
		return a
	}
	return &evals.Results{
		Classifier: "cpg", Cases: cases, Repeat: 1,
		Started: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Finished: time.Date(2026, 11, 29, 10, 0, 3, 0, time.UTC),
		Candidates: []evals.CandidateResult{
			{
				Candidate: evals.Candidate{Model: "gpt-4o-mini", Prompt: "v1", Search: "none"}, ModelCalls: 4,
				Answers: []evals.Answer{yes("a.com", 5, 400), yes("b.com", 3, 100), no("c.com", 5, 300), no("d.com", 4, 200)},
			},
			{
				Candidate: evals.Candidate{Model: "local/unpriced", Prompt: "v2", Search: "none"}, CacheHits: 4,
				Answers: []evals.Answer{
					yes("a.com", 5, 1000), withEvidence(no("b.com", 2, 3000), "brave",
						classifier.EvidenceItem{URL: "https://b.com/about", Title: "B [Official] *Site*", Snippet: "B makes `soap` and <b>shampoo</b>."},
						classifier.EvidenceItem{URL: "https://en.wikipedia.org/wiki/B_(company)", Snippet: "B is a company."}),
					withEvidence(yes("c.com", 2, 2000), "none"),
					{Domain: "d.com", Sample: 1, Status: classifier.StatusFailed, Error: "unreadable model output: empty output"},
				},
			},
		},
	}
}

func withEvidence(a evals.Answer, search string, items ...classifier.EvidenceItem) evals.Answer {
	a.Search, a.Evidence = search, items
	return a
}

func TestScoreAll_LatencyCostAndUnknownPrices(t *testing.T) {
	t.Parallel()
	scores := evals.ScoreAll(fixedResults(), llm.DefaultPrices())

	good := scores[0]
	require.Equal(t, 4, good.Correct)
	require.Equal(t, 1.0, good.Accuracy)
	// Nearest rank over 100, 200, 300, 400 ms: p50 is the 2nd, p95 the 4th.
	require.Equal(t, 200.0, good.LatencyP50MS)
	require.Equal(t, 400.0, good.LatencyP95MS)
	// gpt-4o-mini at $0.15 / $0.60 per million: 4000 × 0.15 + 400 × 0.60.
	require.NotNil(t, good.CostUSD)
	require.InDelta(t, (4000*0.15+400*0.60)/1e6, *good.CostUSD, 1e-12)
	require.InDelta(t, (4000*0.15+400*0.60)/1e6/4*1000, *good.CostPer1K, 1e-12)

	bad := scores[1]
	require.Nil(t, bad.CostUSD, "a model without a price has an unknown cost, not zero")
	require.Nil(t, bad.CostPer1K)
	require.Equal(t, evals.Confusion{TP: 1, FN: 1, FP: 1, FailedNo: 1}, bad.Confusion)
	require.Equal(t, 1, bad.Correct)
	// Three calls (the FAILED one never reached a model): 1000, 2000, 3000.
	require.Equal(t, 2000.0, bad.LatencyP50MS)
	require.Equal(t, 3000.0, bad.LatencyP95MS)
	require.Equal(t, 3000, bad.PromptTokens)
	require.InDelta(t, 0.5, bad.Precision, 1e-9)
	require.InDelta(t, 0.5, bad.Recall, 1e-9)
	require.Equal(t, []evals.ConfidenceScore{
		{Confidence: 1}, {Confidence: 2, Answers: 2}, {Confidence: 3},
		{Confidence: 4}, {Confidence: 5, Answers: 1, Correct: 1, Accuracy: 1},
	}, bad.ByConfidence)
}

func TestGate_Check(t *testing.T) {
	t.Parallel()
	scores := evals.ScoreAll(fixedResults(), llm.DefaultPrices())
	gate := evals.Gate{MaxFN: 0, MinAccuracy: 0.95, MaxFailed: 0}

	require.Empty(t, gate.Check(scores[0]))
	require.Equal(t, []string{
		"accuracy on clear rows 0.333 < --min-accuracy 0.950 (1/3)",
		"1 FAILED > --max-failed 0",
	}, gate.Check(scores[1]), "b.com's false negative is a doubtful row's: not gated")

	res := fixedResults()
	res.Candidates[1].Answers[0].Answer = false // a.com, a clear yes, answered no
	again := evals.ScoreAll(res, llm.DefaultPrices())
	require.Equal(t, []string{
		"1 false negatives on clear rows > --max-fn 0 (a.com)",
		"accuracy on clear rows 0.000 < --min-accuracy 0.950 (0/3)",
		"1 FAILED > --max-failed 0",
	}, gate.Check(again[1]))
	require.Equal(t, []evals.SliceScore{
		{Split: "dev", Total: 2, FN: 1, Failed: 1},
		{Split: "test", Total: 1, FP: 1},
		{Split: "test", Doubtful: true, Total: 1, FN: 1},
	}, again[1].Slices, "by split, clear rows first")
	require.Empty(t, evals.NoGate.Check(scores[1]))
	require.False(t, evals.NoGate.Active())
	require.Equal(t, "false negatives ≤ 0, accuracy ≥ 0.950, FAILED ≤ 0", gate.String())
}

func TestReport_WritesMarkdownJSONAndImages(t *testing.T) {
	t.Parallel()
	res := fixedResults()
	scores := evals.ScoreAll(res, llm.DefaultPrices())
	report := evals.NewReport("evals/fixed.csv", res, scores, evals.Gate{MaxFN: 0, MaxFailed: -1})
	dir := filepath.Join(t.TempDir(), "report")
	md, err := report.Write(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "report.md"), md)

	images := []string{"accuracy_vs_cost.png", "accuracy_vs_latency.png",
		"confusion-1-gpt-4o-mini-v1-none.png", "confusion-2-local-unpriced-v2-none.png"}
	for _, name := range images {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err, "%s is a PNG", name)
		require.Greater(t, img.Bounds().Dx(), 100, name)
		require.Greater(t, img.Bounds().Dy(), 100, name)
	}

	text, err := os.ReadFile(md)
	require.NoError(t, err)
	body := string(text)
	for _, name := range images {
		require.Contains(t, body, "]("+name+")", "the Markdown links %s", name)
	}
	require.Contains(t, body, "4 domains, 2 yes / 2 no, 1 marked doubtful")
	require.Contains(t, body, "| gpt-4o-mini / v1 / none | 4/4 | 1.000 | 0 | 0 | 1.000 | 1.000 | 1.000 | 0 | n/a | 200 ms | 400 ms |")
	require.Contains(t, body, "| local/unpriced / v2 / none | 1/4 | 0.250 | 1 | 1 |")
	require.Contains(t, body, "| unknown | pass |", "the one false negative is a doubtful row's")
	require.Contains(t, body, "| candidate | dev, clear | test, clear | test, doubtful | gate (clear rows) |")
	require.Contains(t, body, "| local/unpriced / v2 / none | 1/2 = 0.500 (0 FN) | 0/1 = 0.000 (0 FN) | 0/1 = 0.000 (1 FN) | 1/3 = 0.333, 0 FN |")
	require.Contains(t, body, "No price for `local/unpriced`")
	require.Contains(t, body, "False negatives (CPG answered no): 1 domain\n\n- `b.com` (cpg) *doubtful* confidence 2: no\n"+
		"  - [B \\[Official\\] \\*Site\\*](<https://b.com/about>): B makes \\`soap\\` and &lt;b&gt;shampoo&lt;/b&gt;.\n"+
		"  - [https://en.wikipedia.org/wiki/B\\_(company)](<https://en.wikipedia.org/wiki/B_(company)>): B is a company.\n",
		"each miss links to what the model was shown, its web text escaped")
	require.Contains(t, body, "- `c.com` (retailer) confidence 2: yes\n  - no evidence (search: none)\n")
	require.Contains(t, body, "FAILED: 1 domain\n\n- `d.com` (retailer): unreadable model output: empty output")
	require.Contains(t, body, "| retailer | 2/2 | 0/2 ✗ |")

	var decoded struct {
		Cases        int                 `json:"cases"`
		GateFailures map[string][]string `json:"gate_failures"`
		Scores       []struct {
			Name      string   `json:"name"`
			Accuracy  float64  `json:"accuracy"`
			CostUSD   *float64 `json:"cost_usd"`
			Confusion struct {
				FN int `json:"fn"`
			} `json:"confusion"`
		} `json:"scores"`
		Images struct {
			Confusion []string `json:"confusion"`
		} `json:"images"`
		Answers []struct {
			Answers []evals.Answer `json:"answers"`
		} `json:"answers"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &decoded))
	require.Equal(t, 4, decoded.Cases)
	require.Len(t, decoded.Scores, 2)
	require.Equal(t, 0.25, decoded.Scores[1].Accuracy)
	require.Nil(t, decoded.Scores[1].CostUSD, "unknown cost is null in JSON")
	require.Equal(t, 1, decoded.Scores[1].Confusion.FN)
	require.Equal(t, images[2:], decoded.Images.Confusion)
	require.Empty(t, decoded.GateFailures, "the gate counts clear rows")
	require.Len(t, decoded.Answers[1].Answers, 4)
}

func TestReport_NoPricedCandidateStillDrawsTheCostChart(t *testing.T) {
	t.Parallel()
	res := fixedResults()
	scores := evals.ScoreAll(res, nil)
	dir := t.TempDir()
	_, err := evals.NewReport("x.csv", res, scores, evals.NoGate).Write(dir)
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(dir, "accuracy_vs_cost.png"))
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "Gate: none.")
	require.True(t, strings.Contains(string(md), "No price for `gpt-4o-mini`, `local/unpriced`"))
}
