package classifier

import (
	"context"
	"fmt"
	"time"
)

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
