package classifier

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ResultStore is what the pipeline needs from storage.
type ResultStore interface {
	// Override returns an operator's override of the domain, and whether
	// there is one.
	Override(ctx context.Context, classifier, domain string) (Override, bool, error)
	// ResultGet returns the last COMPLETED answer for the domain, and
	// whether there is one.
	ResultGet(ctx context.Context, classifier, domain string) (Result, bool, error)
	// ClaimAcquire takes the right to ask the model about a domain until ttl
	// passes; batch marks a provider batch's claim, held for its window. It
	// reports false, with the holder (zero when it could not tell), when
	// another owner holds a live claim.
	ClaimAcquire(ctx context.Context, classifier, domain, owner string, ttl time.Duration, batch bool) (ClaimHolder, bool, error)
	// ClaimTakeOver moves a claim from holder to owner until ttl passes,
	// and reports false when holder no longer holds it.
	ClaimTakeOver(ctx context.Context, classifier, domain, holder, owner string, ttl time.Duration) (bool, error)
	// ClaimRelease gives a claim up early.
	ClaimRelease(ctx context.Context, classifier, domain, owner string) error
}

// ClaimHolder is who holds a live claim on a domain: its owner, whether it
// is a provider batch's, and how long it has held it (by the store's
// clock).
type ClaimHolder struct {
	Owner string
	Batch bool
	Age   time.Duration
}

// Completer is an OpenAI-compatible chat model. call says whose the call
// is and what it must pass before it starts (CallOptions: a list's gate
// touches Postgres); a Completer that schedules nothing ignores it.
type Completer interface {
	Complete(ctx context.Context, req CompletionRequest, call CallOptions) (CompletionResponse, error)
}

// CompletionRequest is one chat completion asking for a JSON object.
type CompletionRequest struct {
	Model      string
	System     string
	User       string
	SchemaName string
	Schema     map[string]any
}

// CompletionResponse is what the model answered.
type CompletionResponse struct {
	Content          string
	Refusal          string
	FinishReason     string
	Model            string
	PromptTokens     int
	CompletionTokens int
	Latency          time.Duration
}

// Searcher gathers web evidence about a domain.
type Searcher interface {
	Search(ctx context.Context, domain string) (Evidence, error)
}

// Evidence is what a search found: text for the prompt and the pages it
// came from.
type Evidence struct {
	Provider string
	Text     string
	Sources  []EvidenceItem
	// Dropped says why each result the provider left out was left out
	// (DroppedScheme, DroppedCharacters, DroppedLength).
	Dropped []string
}

// DefaultClaimWait: a job whose domain another job is asking the model
// about waits up to 30 s for that answer (≈10 model calls' time) before it
// gives the domain back (ErrBusy, and the job snoozes); the wait holds no
// model slot. A domain staged in a provider batch is never waited for by a
// worker: the batch answers within a day, so a job sleeps (a snooze, no
// worker held) until the batch has held it 30 s, then takes the claim over
// and asks the model itself. A reviewed setting: change it in a reviewed
// commit, or per deployment through the environment.
const DefaultClaimWait = 30 * time.Second

// ErrNoLLM is the reason of every domain that needed the model while none
// is configured. It is never replaced by a made-up answer.
const ErrNoLLM = "no LLM configured"

// PipelineConfig configures a Pipeline.
type PipelineConfig struct {
	Store  ResultStore
	LLM    Completer // nil: no LLM configured
	Search Searcher
	// Model is the model name sent to the LLM.
	Model     string
	Freshness Freshness
	// ClaimTTL bounds how long one worker may hold a domain while it asks
	// the model. It must outlast the longest call (the job timeout).
	ClaimTTL time.Duration
	// ClaimWait is how long a worker waits for another worker's answer
	// before it gives the domain back (ErrBusy); ClaimPoll is how often it
	// looks.
	ClaimWait time.Duration
	ClaimPoll time.Duration
	// EvidenceMaxChars caps the web text of one prompt; 0 is
	// DefaultEvidenceMaxChars.
	EvidenceMaxChars int
	// OnEvidenceDropped, when set, is called once for each evidence item
	// left out for its address, with the reason (for metrics).
	OnEvidenceDropped func(reason string)
	Logger            *slog.Logger
	Now               func() time.Time
}

// Pipeline answers one domain the cheapest way: an operator's override,
// then a fresh cached answer, then web search and the model. It holds no
// transaction across a search or model call.
type Pipeline struct {
	cfg PipelineConfig
	// unsaved: answers paid for and not yet stored (Keep), shared with
	// the pipelines made by WithStore.
	unsaved *unsaved
}

// NewPipeline returns a pipeline; zero durations get defaults.
func NewPipeline(cfg PipelineConfig) *Pipeline {
	if cfg.Search == nil {
		cfg.Search = noSearch{}
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 5 * time.Minute
	}
	if cfg.ClaimWait <= 0 {
		cfg.ClaimWait = DefaultClaimWait
	}
	if cfg.ClaimPoll <= 0 {
		cfg.ClaimPoll = 200 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{cfg: cfg, unsaved: &unsaved{}}
}

// WithStore is the same pipeline storing through store: the same model,
// search and settings, and the same answers kept unsaved (an answer a list
// paid for and could not store is found by a job of this process too). A
// process gives its list work its own pool this way, so that interactive
// jobs never wait behind a draining list's statements.
func (p *Pipeline) WithStore(store ResultStore) *Pipeline {
	cfg := p.cfg
	cfg.Store = store
	return &Pipeline{cfg: cfg, unsaved: p.unsaved}
}

// CacheRules are the rules a cached answer is served again under, and the
// pipeline's now: what a set-based look-up of many domains (a list's
// answered rows) applies as cheap does one domain at a time.
func (p *Pipeline) CacheRules() (Freshness, time.Time) { return p.cfg.Freshness, p.cfg.Now() }

// Model is the model the pipeline asks (what a call is priced as before
// it is made).
func (p *Pipeline) Model() string { return p.cfg.Model }

// HasLLM reports whether a model is configured.
func (p *Pipeline) HasLLM() bool { return p.cfg.LLM != nil }

// ClassifyWant answers one domain for a job; want asks for fresher answers
// than the cache's TTLs allow (max_age, refresh). owner identifies the
// caller's claim on the domain (the River job): when the answer comes from
// the model the claim is still held, and the caller must release it in the
// transaction that stores the answer, so no other worker pays for the same
// domain. call counts the model call against the caller's budget (its
// Spender) and schedules it (its share, and its
// gate, which may hold a Postgres transaction while the request is sent).
//
// It returns ErrBusy when another owner is asking the model and did not
// finish in time, an error with RetryAfter when the provider is throttling,
// and other errors for transient failures (retry later). Permanent provider
// errors and unreadable output come back as a FAILED Result, not an error.
func (p *Pipeline) ClassifyWant(ctx context.Context, c *Classifier, domain, owner string, want Want, call CallOptions) (Result, error) {
	if err := p.stopping(); err != nil {
		return Result{}, err
	}
	if r, err := p.cheap(ctx, c, domain, want); err != nil || r != nil {
		return deref(r), err
	}
	return p.askModel(ctx, c, domain, owner, want, call, true)
}

// ClassifyClaimed answers a domain that owner has claimed already, and
// that no override or fresh cached answer answered once it was claimed: a
// list's chunk claims its fresh domains as a set, then answers the rows
// an override or the cache answers as a set, so what is left needs the
// model. It asks the model (after the caller's budget) with no look-up
// and no claim of its own; on an error the claim is given back, as
// ClassifyWant's is.
func (p *Pipeline) ClassifyClaimed(ctx context.Context, c *Classifier, domain, owner string, want Want, call CallOptions) (Result, error) {
	if err := p.stopping(); err != nil {
		return Result{}, err
	}
	return p.askModel(ctx, c, domain, owner, want, call, false)
}

// askModel is ClassifyWant's and ClassifyClaimed's model step: an answer
// kept unsaved, else the caller's budget, the claim (when claim is set)
// and the model.
func (p *Pipeline) askModel(ctx context.Context, c *Classifier, domain, owner string, want Want, call CallOptions, claim bool) (Result, error) {
	if r, ok := p.kept(c, domain, want); ok {
		return *r, nil // paid for by an earlier run whose store failed
	}
	if p.cfg.LLM == nil {
		return failed(c, domain, ErrNoLLM, p.cfg.Now()), nil
	}
	// The caller's budget first: a caller at its budget asks no search
	// and no model, and its domain ends FAILED with the reason.
	spend, err := reserve(ctx, call.Spender, p.cfg.Model)
	if reason, spent := BudgetSpent(err); spent {
		return failed(c, domain, reason, p.cfg.Now()), nil
	} else if err != nil {
		return Result{}, fmt.Errorf("error counting a model call of %s: %w", domain, err)
	}
	var r Result
	if claim {
		r, err = p.claimAndDecide(ctx, c, domain, owner, want, call)
	} else if r, err = p.Decide(ctx, c, domain, DecideOptions{}, call); err != nil {
		p.release(ctx, c, domain, owner)
	}
	called := err == nil && r.Source == SourceLLM && r.Usage != nil
	spend.Settle(r.Usage, r.Model, called)
	return r, err
}

// claimAndDecide claims the domain and asks the model, unless another
// owner's answer (or an override) comes meanwhile.
func (p *Pipeline) claimAndDecide(ctx context.Context, c *Classifier, domain, owner string, want Want, call CallOptions) (Result, error) {
	if r, err := p.claim(ctx, c, domain, owner, p.cfg.ClaimTTL, false, want); err != nil || r != nil {
		return deref(r), err
	}
	// Another worker may have finished, or an operator set an override,
	// between our look-up and claim.
	if r, err := p.cheap(ctx, c, domain, want); err != nil || r != nil {
		p.release(ctx, c, domain, owner)
		return deref(r), err
	}
	r, err := p.Decide(ctx, c, domain, DecideOptions{}, call)
	if err != nil {
		p.release(ctx, c, domain, owner)
		return Result{}, err
	}
	return r, nil
}

// A Stopper is a Completer whose process is stopping: it refuses calls
// (an error that wraps ErrBusy), and the pipeline gives each domain back
// before its look-ups and search, so that the domain's job snoozes and
// another process answers it.
type Stopper interface {
	Stopping() error
}

func (p *Pipeline) stopping() error {
	if s, ok := p.cfg.LLM.(Stopper); ok {
		return s.Stopping()
	}
	return nil
}

// Answered returns the domain's answer from its override, or from a
// cached answer fresh enough for want, or nil: what a batch answers a
// domain with when a call took its claim over.
func (p *Pipeline) Answered(ctx context.Context, c *Classifier, domain string, want Want) (*Result, error) {
	return p.cheap(ctx, c, domain, want)
}

// cheap answers a domain from its override or the cache, or returns nil.
// The override is looked up each time, so that one set while a job or a
// list runs answers the next of its domains to be answered, whatever the
// cache or want say.
func (p *Pipeline) cheap(ctx context.Context, c *Classifier, domain string, want Want) (*Result, error) {
	if r, err := p.Override(ctx, c, domain); err != nil || r != nil {
		return r, err
	}
	return p.cached(ctx, c, domain, want)
}

// Override returns the answer of the domain's override, or nil when it has
// none (an error when the store fails): what answers the domain before the
// cache and the model, for a caller about to ask the model outside Classify
// (a batch's fallback).
func (p *Pipeline) Override(ctx context.Context, c *Classifier, domain string) (*Result, error) {
	o, ok, err := p.cfg.Store.Override(ctx, c.Name, domain)
	if err != nil {
		return nil, fmt.Errorf("error looking up the override of %s: %w", domain, err)
	} else if !ok {
		return nil, nil
	}
	r := o.Result()
	return &r, nil
}

// release gives owner's claim on domain up. It must happen even when ctx is
// done (soft stop), or others wait for the claim's lease to run out.
func (p *Pipeline) release(ctx context.Context, c *Classifier, domain, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.cfg.Store.ClaimRelease(rctx, c.Name, domain, owner); err != nil {
		p.cfg.Logger.WarnContext(ctx, "error releasing domain claim", "domain", domain, "error", err)
	}
}

// cached returns a cached answer fresh enough for want, or nil.
func (p *Pipeline) cached(ctx context.Context, c *Classifier, domain string, want Want) (*Result, error) {
	hit, ok, err := p.cfg.Store.ResultGet(ctx, c.Name, domain)
	if err != nil {
		return nil, fmt.Errorf("error reading cached result for %s: %w", domain, err)
	}
	if now := p.cfg.Now(); !ok || !p.cfg.Freshness.Fresh(&hit, now) || !want.Accepts(&hit, now) {
		return nil, nil
	}
	hit.Source = SourceCache
	hit.Usage = nil
	return &hit, nil
}

// claim takes the domain for owner (for a provider batch's window when
// batch). While another call holds it, it waits for that call's answer and
// returns it as a cache hit (or an override set meanwhile), or ErrBusy once
// ClaimWait has passed. A provider batch's claim is never waited for here:
// once the batch has held it ClaimWait, a call takes it over (the batch
// answers the domain's rows from the call's answer, and gives its caller
// the staged call back); before that, and always for another batch, it
// returns a BusyError that says when to look again.
func (p *Pipeline) claim(ctx context.Context, c *Classifier, domain, owner string, ttl time.Duration, batch bool, want Want) (*Result, error) {
	deadline := p.cfg.Now().Add(p.cfg.ClaimWait)
	ticker := time.NewTicker(p.cfg.ClaimPoll)
	defer ticker.Stop()
	for {
		holder, ok, err := p.cfg.Store.ClaimAcquire(ctx, c.Name, domain, owner, ttl, batch)
		if err != nil {
			return nil, fmt.Errorf("error claiming %s: %w", domain, err)
		} else if ok {
			return nil, nil
		}
		if r, err := p.cheap(ctx, c, domain, want); err != nil || r != nil {
			return r, err
		}
		if holder.Batch {
			if batch || holder.Age < p.cfg.ClaimWait {
				// A batch waits for another batch's answer; a call waits
				// until the batch has had its ClaimWait. Neither holds a
				// worker meanwhile.
				wait := max(p.cfg.ClaimWait-holder.Age, 0)
				if batch {
					wait = 0 // the batch's own: it looks again at its poll interval
				}
				return nil, &BusyError{Domain: domain, Batch: true, Wait: wait}
			}
			took, err := p.cfg.Store.ClaimTakeOver(ctx, c.Name, domain, holder.Owner, owner, ttl)
			if err != nil {
				return nil, fmt.Errorf("error taking over the batch's claim on %s: %w", domain, err)
			} else if took {
				p.cfg.Logger.DebugContext(ctx, "took a provider batch's claim over", "domain", domain, "batch", holder.Owner)
				return nil, nil
			}
			continue // another call took it first: wait for that one
		}
		if p.cfg.Now().After(deadline) {
			return nil, ErrBusy
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
}

// DecideOptions override the model and prompt version, for evaluations.
type DecideOptions struct {
	Model         string
	PromptVersion string
}

// Decide runs the search and model step for one domain, with no cache and no
// override. The worker and the evaluation harness both use it; call
// schedules the model call (Completer.Complete).
// It returns a FAILED Result for permanent problems (refusal, unreadable
// output, a request the provider rejects) and an error for transient ones.
func (p *Pipeline) Decide(ctx context.Context, c *Classifier, domain string, opts DecideOptions, call CallOptions) (Result, error) {
	if p.cfg.LLM == nil {
		return failed(c, domain, ErrNoLLM, p.cfg.Now()), nil
	}
	pr, err := p.Prepare(ctx, c, domain, opts)
	if err != nil {
		return Result{}, err
	}
	return p.Ask(ctx, c, pr, call)
}

// Ask sends a prepared request to the model now and reads the answer: the
// second half of Decide, and the fallback of a batch item. call schedules
// the model call (Completer.Complete).
func (p *Pipeline) Ask(ctx context.Context, c *Classifier, pr Prepared, call CallOptions) (Result, error) {
	if p.cfg.LLM == nil {
		return failed(c, pr.Domain, ErrNoLLM, p.cfg.Now()), nil
	}
	resp, err := p.cfg.LLM.Complete(ctx, pr.Request, call)
	if err != nil {
		if IsPermanent(err) {
			r := failed(c, pr.Domain, "model request rejected: "+err.Error(), p.cfg.Now())
			r.Source, r.Model, r.PromptVersion, r.Search, r.Evidence = SourceLLM, pr.Request.Model, pr.PromptVersion, pr.Search, pr.Sources
			return r, nil
		}
		return Result{}, fmt.Errorf("error asking the model about %s: %w", pr.Domain, err)
	}
	return p.Verdict(c, pr, resp), nil
}

// Prepared is the model request for one domain, ready to be sent now or in
// a batch: what Decide sends, with what it was made from.
type Prepared struct {
	Domain        string
	Request       CompletionRequest
	PromptVersion string
	// Search is the search provider; Sources are the pages of the evidence
	// in the prompt.
	Search  string
	Sources []EvidenceItem
}

// Prepare runs the search step for one domain and renders its prompt.
func (p *Pipeline) Prepare(ctx context.Context, c *Classifier, domain string, opts DecideOptions) (Prepared, error) {
	prompt, err := c.Prompt(opts.PromptVersion)
	if err != nil {
		return Prepared{}, err
	}
	model := cmp.Or(opts.Model, p.cfg.Model)
	ev, err := p.search(ctx, domain)
	if err != nil {
		if !IsPermanent(err) {
			return Prepared{}, fmt.Errorf("error searching for %s: %w", domain, err)
		}
		// A search the provider refuses (bad key, odd query) should not cost
		// the answer: the model answers from what it knows.
		p.cfg.Logger.WarnContext(ctx, "search rejected; answering without evidence", "domain", domain, "error", err)
		ev = Evidence{}
	}
	text := Truncate(ev.Text, cmp.Or(p.cfg.EvidenceMaxChars, DefaultEvidenceMaxChars))
	user, err := prompt.Render(PromptData{Domain: domain, Provider: ev.Provider, Evidence: fenceEvidence(text)})
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{
		Domain: domain, PromptVersion: prompt.Version, Search: ev.Provider, Sources: shown(ev.Sources, ev.Text, text),
		Request: CompletionRequest{
			Model: model, System: strings.TrimSpace(prompt.System) + "\n\n" + untrustedNote, User: user,
			SchemaName: c.Name + "_verdict", Schema: c.ResponseSchema(),
		},
	}, nil
}

// Verdict reads the model's response to a prepared request: the answer,
// or a FAILED Result when it refused or wrote something unreadable.
func (p *Pipeline) Verdict(c *Classifier, pr Prepared, resp CompletionResponse) Result {
	r := Result{
		Domain: pr.Domain, Classifier: c.Name, Source: SourceLLM, ClassifiedAt: p.cfg.Now().UTC(),
		Model: cmp.Or(resp.Model, pr.Request.Model), PromptVersion: pr.PromptVersion,
		Search: pr.Search, Evidence: pr.Sources,
		Usage: &Usage{PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, Latency: resp.Latency, Raw: resp.Content},
	}
	// An error may quote the model: on one line, without control characters
	// (it is shown in results and terminals).
	if resp.Refusal != "" {
		r.Status, r.Error = StatusFailed, "model refused: "+Truncate(FoldLine(resp.Refusal), 200)
		return r
	}
	v, err := ParseVerdict(resp.Content, c.AnswerField)
	if err != nil {
		r.Status, r.Error = StatusFailed, FoldLine(err.Error())
		if resp.FinishReason == "length" {
			r.Error += " (the model ran out of output tokens)"
		}
		return r
	}
	r.Status, r.Answer, r.Confidence, r.Reasoning = StatusCompleted, v.Answer, v.Confidence, v.Reasoning
	return r
}

// Stage is Classify for a batch: a domain an override or the cache
// answers comes back answered; a fresh one is claimed for owner for ttl
// (the batch's whole window) and comes back as the request to batch, with
// a PENDING Result. The claim stays held until the answer is stored.
// call.Spender counts the staged call against the caller's budget; no
// model call is made here, so its share and gate are not asked.
func (p *Pipeline) Stage(ctx context.Context, c *Classifier, domain, owner string, ttl time.Duration, want Want, call CallOptions) (Result, *Prepared, error) {
	if err := p.stopping(); err != nil {
		return Result{}, nil, err
	}
	if r, err := p.cheap(ctx, c, domain, want); err != nil || r != nil {
		return deref(r), nil, err
	}
	if p.cfg.LLM == nil {
		return failed(c, domain, ErrNoLLM, p.cfg.Now()), nil, nil
	}
	// A batched call counts against the caller's budget when it is staged,
	// at its estimate.
	spend, err := reserve(ctx, call.Spender, p.cfg.Model)
	if reason, spent := BudgetSpent(err); spent {
		return failed(c, domain, reason, p.cfg.Now()), nil, nil
	} else if err != nil {
		return Result{}, nil, fmt.Errorf("error counting a model call of %s: %w", domain, err)
	}
	r, pr, err := p.stage(ctx, c, domain, owner, ttl, want)
	spend.Settle(nil, p.cfg.Model, pr != nil && err == nil)
	return r, pr, err
}

func (p *Pipeline) stage(ctx context.Context, c *Classifier, domain, owner string, ttl time.Duration, want Want) (Result, *Prepared, error) {
	if r, err := p.claim(ctx, c, domain, owner, ttl, true, want); err != nil || r != nil {
		return deref(r), nil, err
	}
	if r, err := p.cheap(ctx, c, domain, want); err != nil || r != nil {
		p.release(ctx, c, domain, owner)
		return deref(r), nil, err
	}
	pr, err := p.Prepare(ctx, c, domain, DecideOptions{})
	if err != nil {
		p.release(ctx, c, domain, owner)
		return Result{}, nil, err
	}
	return Result{Domain: domain, Classifier: c.Name, Status: StatusPending}, &pr, nil
}

func failed(c *Classifier, domain, reason string, now time.Time) Result {
	return Result{Domain: domain, Classifier: c.Name, Status: StatusFailed, Error: reason, ClassifiedAt: now.UTC()}
}

func deref(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}

type noSearch struct{}

func (noSearch) Search(context.Context, string) (Evidence, error) { return Evidence{}, nil }

// search runs the search step in a client span: the provider and how many
// sources it found (the sources themselves are in the stored answer).
func (p *Pipeline) search(ctx context.Context, domain string) (Evidence, error) {
	ctx, span := tracer().Start(ctx, "search", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("domainclass.domain", domain)))
	defer span.End()
	ev, err := p.cfg.Search.Search(ctx, domain)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return ev, err
	}
	// Whatever the provider: an address that is not fit to keep with the
	// answer, show in a CSV or a terminal, or send in a webhook is dropped
	// with its item, and counted.
	var dropped []string
	ev.Sources, dropped = keepFit(ev.Sources)
	ev.Dropped = append(ev.Dropped, dropped...)
	if len(ev.Dropped) > 0 {
		p.cfg.Logger.WarnContext(ctx, "evidence addresses dropped", "domain", domain, "provider", ev.Provider,
			"reasons", ev.Dropped)
		if p.cfg.OnEvidenceDropped != nil {
			for _, why := range ev.Dropped {
				p.cfg.OnEvidenceDropped(why)
			}
		}
	}
	span.SetAttributes(attribute.String("domainclass.search.provider", ev.Provider),
		attribute.Int("domainclass.search.sources", len(ev.Sources)), attribute.Int("domainclass.search.dropped", len(ev.Dropped)))
	return ev, nil
}

// tracer makes the pipeline's spans (a no-op until tracing is set up).
// It asks the global provider each time, so that the one installed last
// serves (in production there is one; tests install their own).
func tracer() trace.Tracer { return otel.Tracer("github.com/domainclass/domainclass/classifier") }
