package evals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/domainclass/domainclass/classifier"
)

// Candidate is one configuration to measure: a model, a prompt version and
// a search provider.
type Candidate struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
	Search string `json:"search"`
}

// String names the candidate as "model / prompt / search".
func (c Candidate) String() string { return c.Model + " / " + c.Prompt + " / " + c.Search }

// Candidates returns every combination of models, prompt versions and
// search providers, in that nesting order, without duplicates.
func Candidates(models, prompts, searches []string) []Candidate {
	var out []Candidate
	seen := map[Candidate]bool{}
	for _, m := range models {
		for _, p := range prompts {
			for _, s := range searches {
				c := Candidate{Model: m, Prompt: p, Search: s}
				if !seen[c] {
					seen[c] = true
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// Config configures a run.
type Config struct {
	Classifier *classifier.Classifier
	Cases      []Case
	Candidates []Candidate
	// Repeat asks each candidate about each domain this many times, to see
	// how often its answer flips. Default 1.
	Repeat int
	// Concurrency bounds the answers worked on at once. Default 4. The
	// model calls are bounded again by LLM (llm.Limit), with its rate.
	Concurrency int
	// LLM is the OpenAI-compatible model, usually behind llm.Limit.
	LLM classifier.Completer
	// Searchers by provider name; every candidate's Search must be here.
	Searchers map[string]classifier.Searcher
	// Cache keeps responses and evidence; nil runs without one.
	Cache *Cache
	// Attempts is how often an answer is tried when the provider has a
	// transient failure (5xx, timeout, 429); then it counts as FAILED.
	// Default 4.
	Attempts int
	// RetryWait is the first wait between attempts, doubled each time;
	// MaxRetryWait caps it and the provider's Retry-After. Defaults 1s, 1m.
	RetryWait, MaxRetryWait time.Duration
	// OnAnswer is called after each answer (from several goroutines), for
	// progress.
	OnAnswer func()
	Logger   *slog.Logger
}

// WithDefaults fills in the zero values.
func (c Config) WithDefaults() Config {
	if c.Repeat <= 0 {
		c.Repeat = 1
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Attempts <= 0 {
		c.Attempts = 4
	}
	if c.RetryWait <= 0 {
		c.RetryWait = time.Second
	}
	if c.MaxRetryWait <= 0 {
		c.MaxRetryWait = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first thing that makes the run impossible: no
// classifier, cases, candidates or model; a prompt version the classifier
// does not have; a search provider that is not configured.
func (c Config) Validate() error {
	switch {
	case c.Classifier == nil:
		return errors.New("no classifier")
	case len(c.Cases) == 0:
		return errors.New("no labelled domains")
	case len(c.Candidates) == 0:
		return errors.New("no candidates")
	case c.LLM == nil:
		return errors.New("no model configured")
	}
	for _, cand := range c.Candidates {
		if cand.Model == "" {
			return errors.New("a candidate has no model")
		}
		if _, err := c.Classifier.Prompt(cand.Prompt); err != nil {
			return err
		}
		if _, ok := c.Searchers[cand.Search]; !ok {
			return fmt.Errorf("search provider %q is not configured", cand.Search)
		}
	}
	return nil
}

// Results is everything a run produced, before scoring.
type Results struct {
	Classifier string            `json:"classifier"`
	Cases      []Case            `json:"-"`
	Repeat     int               `json:"repeat"`
	Candidates []CandidateResult `json:"candidates"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
}

// CandidateResult is one candidate's answers, case by case and, within a
// case, sample by sample.
type CandidateResult struct {
	Candidate Candidate `json:"candidate"`
	Answers   []Answer  `json:"answers"`
	// ModelCalls were sent to the provider in this run; CacheHits were
	// answered from the cache instead.
	ModelCalls int `json:"model_calls"`
	CacheHits  int `json:"cache_hits"`
}

// Answer is what a candidate said about one domain in one sample.
type Answer struct {
	Domain     string            `json:"domain"`
	Sample     int               `json:"sample"`
	Status     classifier.Status `json:"status"`
	Answer     bool              `json:"answer"`
	Confidence int               `json:"confidence,omitempty"`
	Reasoning  string            `json:"reasoning,omitempty"`
	Error      string            `json:"error,omitempty"`
	// Called reports that the model answered (latency and tokens are set).
	Called           bool    `json:"called"`
	LatencyMS        float64 `json:"latency_ms,omitempty"`
	PromptTokens     int     `json:"prompt_tokens,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
	Raw              string  `json:"raw,omitempty"`
	// Search and Evidence are what the model was shown (provenance).
	Search   string                    `json:"search,omitempty"`
	Evidence []classifier.EvidenceItem `json:"evidence,omitempty"`
}

// Outcome is "yes", "no" or "FAILED": what flip rates compare.
func (a Answer) Outcome() string {
	switch {
	case a.Status != classifier.StatusCompleted:
		return string(classifier.StatusFailed)
	case a.Answer:
		return "yes"
	}
	return "no"
}

// Run asks every candidate about every case Repeat times, through the
// pipeline's Decide — the worker's own search and model step, without its
// result cache or overrides. Answers that fail (unreadable
// output, a refusal, a rejected request, or a transient error that outlasts
// the attempts) are recorded as FAILED; Run returns an error only for an
// invalid config or when ctx ends.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}

	searchers := map[string]classifier.Searcher{}
	for name, s := range cfg.Searchers {
		searchers[name] = newSharedSearcher(name, s, cfg.Cache)
	}
	res := &Results{Classifier: cfg.Classifier.Name, Cases: cfg.Cases, Repeat: cfg.Repeat, Started: time.Now().UTC()}
	// One pipeline per (candidate, sample): each has its own cache view
	// (the sample is part of the response key) and its own call counts.
	completers := make([][]*completer, len(cfg.Candidates))
	pipelines := make([][]*classifier.Pipeline, len(cfg.Candidates))
	for i, cand := range cfg.Candidates {
		res.Candidates = append(res.Candidates, CandidateResult{
			Candidate: cand, Answers: make([]Answer, len(cfg.Cases)*cfg.Repeat),
		})
		for s := 1; s <= cfg.Repeat; s++ {
			cc := &completer{cache: cfg.Cache, next: cfg.LLM, sample: s}
			completers[i] = append(completers[i], cc)
			pipelines[i] = append(pipelines[i], classifier.NewPipeline(classifier.PipelineConfig{
				LLM: cc, Search: searchers[cand.Search], Model: cand.Model, Logger: cfg.Logger,
			}))
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Concurrency)
	for s := 1; s <= cfg.Repeat; s++ {
		for i, cand := range cfg.Candidates {
			for j, cs := range cfg.Cases {
				g.Go(func() error {
					a, err := answer(gctx, cfg, pipelines[i][s-1], cand, cs.Domain, s)
					if err != nil {
						return err
					}
					res.Candidates[i].Answers[j*cfg.Repeat+s-1] = a
					if cfg.OnAnswer != nil {
						cfg.OnAnswer()
					}
					return nil
				})
			}
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range res.Candidates {
		for _, cc := range completers[i] {
			res.Candidates[i].ModelCalls += cc.calls()
			res.Candidates[i].CacheHits += cc.hits()
		}
	}
	res.Finished = time.Now().UTC()
	return res, nil
}

// answer asks one candidate about one domain, trying again after transient
// failures. It returns an error only when ctx ends.
func answer(ctx context.Context, cfg Config, p *classifier.Pipeline, cand Candidate, domain string, sample int) (Answer, error) {
	wait := cfg.RetryWait
	for attempt := 1; ; attempt++ {
		r, err := p.Decide(ctx, cfg.Classifier, domain, classifier.DecideOptions{Model: cand.Model, PromptVersion: cand.Prompt},
			classifier.CallOptions{}) // interactive, ungated, on no caller's budget
		if err == nil {
			return toAnswer(r, sample), nil
		}
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		if attempt >= cfg.Attempts {
			return Answer{Domain: domain, Sample: sample, Status: classifier.StatusFailed,
				Error: fmt.Sprintf("gave up after %d attempts: %s", attempt, strings.Join(strings.Fields(err.Error()), " "))}, nil
		}
		d := wait
		if ra, ok := classifier.RetryAfter(err); ok {
			d = ra
		} else {
			wait *= 2
		}
		d = min(d, cfg.MaxRetryWait)
		cfg.Logger.WarnContext(ctx, "transient failure; trying again", "domain", domain, "model", cand.Model,
			"attempt", attempt, "wait", d.String(), "error", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Answer{}, ctx.Err()
		case <-t.C:
		}
	}
}

func toAnswer(r classifier.Result, sample int) Answer {
	a := Answer{
		Domain: r.Domain, Sample: sample, Status: r.Status, Error: r.Error,
		Answer: r.Answer, Confidence: r.Confidence, Reasoning: r.Reasoning,
		Search: r.Search, Evidence: r.Evidence,
	}
	if r.Status != classifier.StatusCompleted {
		a.Answer, a.Confidence = false, 0
	}
	if u := r.Usage; u != nil {
		a.Called = true
		a.LatencyMS = durationMS(u.Latency)
		a.PromptTokens, a.CompletionTokens = u.PromptTokens, u.CompletionTokens
		a.Raw = u.Raw
	}
	return a
}

// completer answers from the cache when there is one, and counts the calls
// it passes on to the model.
type completer struct {
	cache  *Cache
	next   classifier.Completer
	sample int

	nCalls, nHits atomic.Int64
}

func (c *completer) Complete(ctx context.Context, req classifier.CompletionRequest, call classifier.CallOptions) (classifier.CompletionResponse, error) {
	if c.cache == nil {
		c.nCalls.Add(1)
		return c.next.Complete(ctx, req, call)
	}
	resp, hit, err := c.cache.complete(ctx, c.next, req, call, c.sample)
	if hit {
		c.nHits.Add(1)
	} else {
		c.nCalls.Add(1)
	}
	return resp, err
}

func (c *completer) calls() int { return int(c.nCalls.Load()) }
func (c *completer) hits() int  { return int(c.nHits.Load()) }

func durationMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
