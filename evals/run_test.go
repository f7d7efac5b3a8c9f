package evals_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/evals"
)

// smallScript answers testdata/small.csv as each domain's name says.
func smallScript(req llmtest.Request) llmtest.Reply {
	garbage := llmtest.Reply{Content: "I would rather not say.", PromptTokens: 100, CompletionTokens: 10}
	switch req.Domain {
	case "tp1-example.com", "tp2-example.com":
		return llmtest.Answer(true, 5, "Makes snacks.")
	case "tp3-example.com":
		return llmtest.Answer(true, 4, "DTC soap brand.")
	case "fn1-example.com":
		return llmtest.Answer(false, 3, "Looks like a holding company.")
	case "fn2-example.com":
		return llmtest.Answer(false, 5, "A software company.")
	case "fail1-example.com", "fail2-example.com":
		return garbage
	case "tn1-example.com":
		return llmtest.Answer(false, 5, "A retailer.")
	case "tn2-example.com":
		return llmtest.Answer(false, 4, "A retailer.")
	case "tn3-example.com":
		if req.Call == 1 {
			return llmtest.Status(http.StatusInternalServerError, nil)
		}
		return llmtest.Answer(false, 4, "Software.")
	case "fp1-example.com":
		return llmtest.Answer(true, 2, "Maybe sells its own brand.")
	}
	return llmtest.Status(http.StatusNotFound, nil)
}

// testPrices prices test-model at $1 / $2 per million tokens in / out.
var testPrices = llm.Prices{{Model: "test-model", Input: 1, Output: 2, Source: "test"}}

type runBundle struct {
	t      *testing.T
	llm    *llmtest.Server
	cpg    *classifier.Classifier
	cache  *evals.Cache
	client classifier.Completer
}

func setup(t *testing.T, handle func(llmtest.Request) llmtest.Reply) *runBundle {
	t.Helper()
	srv := llmtest.New(t, handle)
	client, err := llm.New(llm.Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Timeout: dbtest.Patience()})
	require.NoError(t, err)
	cpg, err := classifier.DefaultRegistry().Get("cpg")
	require.NoError(t, err)
	cache, err := evals.OpenCache(t.TempDir())
	require.NoError(t, err)
	return &runBundle{t: t, llm: srv, cpg: cpg, cache: cache, client: llm.Limit(client, 4, 60000, nil)}
}

func (b *runBundle) config(data string, candidates ...evals.Candidate) evals.Config {
	b.t.Helper()
	cases, err := evals.LoadCases(data, "is_cpg")
	require.NoError(b.t, err)
	return evals.Config{
		Classifier: b.cpg, Cases: cases, Candidates: candidates, Concurrency: 4,
		LLM: b.client, Searchers: map[string]classifier.Searcher{"none": search.None{}},
		Cache: b.cache, RetryWait: time.Millisecond,
	}
}

func (b *runBundle) run(cfg evals.Config) []evals.Score {
	b.t.Helper()
	res, err := evals.Run(context.Background(), cfg)
	require.NoError(b.t, err)
	return evals.ScoreAll(res, testPrices)
}

var testCandidate = evals.Candidate{Model: "test-model", Prompt: "v1", Search: "none"}

func TestRun_ScoresEqualHandComputedValues(t *testing.T) {
	t.Parallel()
	b := setup(t, smallScript)
	scores := b.run(b.config("testdata/small.csv", testCandidate))
	require.Len(t, scores, 1)
	s := scores[0]

	require.Equal(t, "test-model / v1 / none", s.Name)
	require.Equal(t, evals.Confusion{TP: 3, FN: 2, FP: 1, TN: 3, FailedYes: 1, FailedNo: 1}, s.Confusion)
	require.Equal(t, 11, s.Total)
	require.Equal(t, 6, s.Correct)
	require.InDelta(t, 6.0/11, s.Accuracy, 1e-9)
	require.InDelta(t, 0.75, s.Precision, 1e-9) // 3 / (3+1)
	require.InDelta(t, 0.6, s.Recall, 1e-9)     // 3 / (3+2)
	require.InDelta(t, 2*0.75*0.6/1.35, s.F1, 1e-9)
	require.Equal(t, 2, s.Failed)

	require.Equal(t, []evals.Miss{
		{Domain: "fn1-example.com", Doubtful: true, Kind: "subsidiary", Times: 1, Of: 1, Reason: "Looks like a holding company.", Confidence: 3, Search: "none"},
		{Domain: "fn2-example.com", Kind: "cpg", Times: 1, Of: 1, Reason: "A software company.", Confidence: 5, Search: "none"},
	}, s.FalseNegatives)
	require.Equal(t, []string{"fp1-example.com"}, domains(s.FalsePositives))
	require.Equal(t, []string{"fail1-example.com", "fail2-example.com"}, domains(s.Failures))
	require.Contains(t, s.Failures[0].Reason, "unreadable model output")

	// Confidence 5: tp1, tp2, tn1 right, fn2 wrong. 4: tp3, tn2, tn3 right.
	// 3: fn1 wrong. 2: fp1 wrong. 1: none.
	require.Equal(t, []evals.ConfidenceScore{
		{Confidence: 1},
		{Confidence: 2, Answers: 1, Correct: 0, Accuracy: 0},
		{Confidence: 3, Answers: 1, Correct: 0, Accuracy: 0},
		{Confidence: 4, Answers: 3, Correct: 3, Accuracy: 1},
		{Confidence: 5, Answers: 4, Correct: 3, Accuracy: 0.75},
	}, s.ByConfidence)
	require.Equal(t, []evals.KindScore{
		{Kind: "cpg", Total: 4, Correct: 2}, {Kind: "dtc", Total: 1, Correct: 1}, {Kind: "retailer", Total: 3, Correct: 2},
		{Kind: "software", Total: 2, Correct: 1}, {Kind: "subsidiary", Total: 1, Correct: 0},
	}, s.ByKind)
	require.Nil(t, s.FlipRate, "no flip rate without --repeat")

	// Nine verdicts of 120/25 tokens and two unreadable replies of 100/10;
	// the 500 before tn3's answer has no usage.
	require.Equal(t, 9*120+2*100, s.PromptTokens)
	require.Equal(t, 9*25+2*10, s.CompletionTokens)
	require.NotNil(t, s.CostUSD)
	require.InDelta(t, (1280*1.0+245*2.0)/1e6, *s.CostUSD, 1e-12)
	require.InDelta(t, (1280*1.0+245*2.0)/1e6/11*1000, *s.CostPer1K, 1e-12)
	require.Greater(t, s.LatencyP95MS, 0.0)
	require.GreaterOrEqual(t, s.LatencyP95MS, s.LatencyP50MS)

	// tn3 was asked twice (a 500, then the answer); the rest once.
	require.Equal(t, 12, b.llm.Total())
	require.Equal(t, 2, b.llm.Calls("tn3-example.com"))
	require.Equal(t, 12, s.ModelCalls)
	require.Equal(t, 0, s.CacheHits)
}

func TestRun_RerunIsAnsweredFromTheCache(t *testing.T) {
	t.Parallel()
	b := setup(t, smallScript)
	cfg := b.config("testdata/small.csv", testCandidate)
	first := b.run(cfg)[0]
	calls := b.llm.Total()
	require.Equal(t, 12, calls)

	again := b.run(cfg)[0]
	require.Equal(t, calls, b.llm.Total(), "a rerun makes no model call")
	require.Equal(t, 0, again.ModelCalls)
	require.Equal(t, 11, again.CacheHits)
	// The report of a rerun is the first one's, latency and tokens included.
	again.ModelCalls, again.CacheHits = first.ModelCalls, first.CacheHits
	require.Equal(t, first, again)

	// A new prompt version is a new question: it misses the cache.
	b.run(b.config("testdata/small.csv", evals.Candidate{Model: "test-model", Prompt: "v2", Search: "none"}))
	require.Equal(t, calls+11, b.llm.Total())
}

func TestRun_RepeatReportsFlipRate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(req llmtest.Request) llmtest.Reply {
		switch req.Domain {
		case "stable-yes-example.com":
			return llmtest.Answer(true, 5, "Food.")
		case "flip1-example.com":
			return llmtest.Answer(req.Call%2 == 1, 3, "Unsure.")
		case "flip2-example.com":
			if req.Call == 2 {
				return llmtest.Reply{Content: "no idea"}
			}
		}
		return llmtest.Answer(false, 4, "Not CPG.")
	})
	cfg := b.config("testdata/flip.csv", testCandidate)
	cfg.Repeat = 3
	s := b.run(cfg)[0]

	for _, d := range []string{"stable-yes-example.com", "stable-no-example.com", "flip1-example.com", "flip2-example.com"} {
		require.Equal(t, 3, b.llm.Calls(d), "every sample asks the model: %s", d)
	}
	// flip1 answered yes, no, yes; flip2 no, FAILED, no: 2 of 4 flipped.
	require.NotNil(t, s.FlipRate)
	require.InDelta(t, 0.5, *s.FlipRate, 1e-9)
	require.Equal(t, []string{"flip1-example.com", "flip2-example.com"}, s.Flipped)
	require.Equal(t, evals.Confusion{TP: 5, FN: 1, TN: 5, FailedNo: 1}, s.Confusion)
	require.Equal(t, 12, s.Total)
	require.Equal(t, 10, s.Correct)
	require.Len(t, s.FalseNegatives, 1)
	require.Equal(t, 1, s.FalseNegatives[0].Times)
	require.Equal(t, 3, s.FalseNegatives[0].Of)

	// The repeats are cached sample by sample: a rerun asks nothing and
	// flips the same way.
	again := b.run(cfg)[0]
	require.Equal(t, 12, b.llm.Total())
	require.InDelta(t, 0.5, *again.FlipRate, 1e-9)
}

func TestRun_SearchEvidenceIsSharedAndCached(t *testing.T) {
	t.Parallel()
	fetches := map[string]int{}
	var mu sync.Mutex
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><head><title>Crunchy snacks for everyone</title></head><body>Our chips.</body></html>"))
	}))
	t.Cleanup(site.Close)
	var prompts []string
	b := setup(t, func(req llmtest.Request) llmtest.Reply {
		mu.Lock()
		prompts = append(prompts, req.User)
		mu.Unlock()
		return llmtest.Answer(true, 4, "Snacks.")
	})
	homepage := &search.Homepage{Client: site.Client(), Timeout: dbtest.Patience(),
		URLs: func(domain string) []string { return []string{site.URL + "/" + domain} }}
	cfg := b.config("testdata/flip.csv",
		evals.Candidate{Model: "test-model", Prompt: "v1", Search: "homepage"},
		evals.Candidate{Model: "other-model", Prompt: "v1", Search: "homepage"})
	cfg.Searchers = map[string]classifier.Searcher{"homepage": homepage}
	b.run(cfg)

	require.Len(t, fetches, 4)
	for path, n := range fetches {
		require.Equal(t, 1, n, "two candidates, one fetch: %s", path)
	}
	require.Len(t, prompts, 8)
	for _, p := range prompts {
		require.Contains(t, p, "Crunchy snacks for everyone", "the evidence reaches the model")
	}

	// A rerun neither searches nor asks.
	b.run(cfg)
	require.Len(t, prompts, 8)
	for path, n := range fetches {
		require.Equal(t, 1, n, "a rerun does not search again: %s", path)
	}
}

func TestRun_RejectsABadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, smallScript)
	cfg := b.config("testdata/small.csv", evals.Candidate{Model: "m", Prompt: "v9", Search: "none"})
	_, err := evals.Run(context.Background(), cfg)
	require.ErrorContains(t, err, `no prompt version "v9"`)

	cfg = b.config("testdata/small.csv", evals.Candidate{Model: "m", Prompt: "v1", Search: "brave"})
	_, err = evals.Run(context.Background(), cfg)
	require.ErrorContains(t, err, `search provider "brave" is not configured`)
	require.Zero(t, b.llm.Total())
}

func domains(ms []evals.Miss) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Domain)
	}
	return out
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	got := evals.Candidates([]string{"a", "b"}, []string{"v1", "v1", "v2"}, []string{"none"})
	var names []string
	for _, c := range got {
		names = append(names, c.String())
	}
	require.Equal(t, "a / v1 / none,a / v2 / none,b / v1 / none,b / v2 / none", strings.Join(names, ","))
}
