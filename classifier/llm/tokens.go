package llm

import (
	"math"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// tokenEstimator guesses a request's tokens before it is sent, as a
// tokens-per-minute limit counts them (prompt and completion), and learns
// from each response's usage: a prompt's tokens are about a quarter of its
// characters times what this model's tokenizer made of the last prompts,
// and a completion takes about what the last ones took. It also keeps the
// calls' mean latency and tokens, which a lease reports.
type tokenEstimator struct {
	mu         sync.Mutex
	ratio      float64 // the prompts' tokens ÷ (characters / 4)
	completion float64
	latency    float64 // seconds; 0 until a call ended
	tokens     float64
}

// The estimator's start and its memory: each response moves the means a
// tenth of the way, so a few calls correct a wrong start and one odd
// answer does not swing it.
const (
	defaultCompletionTokens = 60 // a one-line verdict
	learnRate               = 0.1
)

func newTokenEstimator() *tokenEstimator {
	return &tokenEstimator{ratio: 1, completion: defaultCompletionTokens}
}

func promptChars(req classifier.CompletionRequest) float64 {
	return float64(len(req.System) + len(req.User))
}

func (e *tokenEstimator) estimate(req classifier.CompletionRequest) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return math.Ceil(promptChars(req)/4*e.ratio + e.completion)
}

func (e *tokenEstimator) learn(req classifier.CompletionRequest, resp classifier.CompletionResponse, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if chars := promptChars(req); resp.PromptTokens > 0 && chars > 0 {
		e.ratio += learnRate * (float64(resp.PromptTokens)/(chars/4) - e.ratio)
	}
	if resp.CompletionTokens > 0 {
		e.completion += learnRate * (float64(resp.CompletionTokens) - e.completion)
	}
	if used := float64(resp.PromptTokens + resp.CompletionTokens); used > 0 {
		e.tokens = ewma(e.tokens, used)
	}
	e.latency = ewma(e.latency, d.Seconds())
}

// means returns the calls' mean latency (seconds) and tokens; 0 before
// the first.
func (e *tokenEstimator) means() (latency, tokens float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.latency, e.tokens
}

func ewma(mean, x float64) float64 {
	if mean == 0 {
		return x
	}
	return mean + learnRate*(x-mean)
}
