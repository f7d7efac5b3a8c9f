package classifier

import (
	"context"
	"fmt"
	"log/slog"
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
