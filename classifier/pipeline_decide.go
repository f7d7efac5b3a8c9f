package classifier

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"
)

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
