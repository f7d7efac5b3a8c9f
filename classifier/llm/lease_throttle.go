package llm

import (
	"context"
	"math"
	"time"
)

// ProviderSaid implements Feedback: a 429 stops this process's calls for
// its wait and lowers its capacity at once, and the store tells the other
// processes at their next renewal; a remainder of zero waits, here, for
// the room of one request; stated limits are recorded for all.
func (b *Capacity) ProviderSaid(r RateLimits) {
	now := time.Now()
	b.mu.Lock()
	until := b.cooldown
	lower := false
	switch {
	case r.Throttled:
		until = now.Add(r.RetryAfter)
		if lower = b.throttled(now); lower {
			b.acct.Factor = math.Max(factorFloor, b.acct.factor(now.Add(b.offset))*throttleFactor)
			b.acct.FactorAt = now.Add(b.offset)
		}
	case r.RemainingRequests == 0 && r.LimitRequests > 0:
		until = now.Add(time.Minute / time.Duration(r.LimitRequests))
	case r.RemainingTokens >= 0 && r.LimitTokens > 0 && r.RemainingTokens < typicalRequestTokens:
		until = now.Add(time.Duration(float64(time.Minute) * float64(typicalRequestTokens-r.RemainingTokens) / float64(r.LimitTokens)))
	}
	if until.After(b.cooldown) {
		b.cooldown = until
	}
	stated := [2]int{r.LimitRequests, r.LimitTokens}
	newStated := (stated[0] > 0 && stated[0] != b.stated[0]) || (stated[1] > 0 && stated[1] != b.stated[1])
	if newStated {
		b.stated = stated
		b.acct = b.acct.withStated(stated)
	}
	var l limits
	if b.lim != nil {
		l = b.schedulerLimits(now)
	}
	b.mu.Unlock()
	if b.lim != nil {
		b.lim.slots.setLimits(l)
	}
	// A burst of 429s is one write of its cool-down, but a 429 that lowers
	// the capacity is always written.
	if r.Throttled && (lower || b.throttling.CompareAndSwap(false, true)) {
		go b.write("error recording the provider's throttle", func(ctx context.Context) error {
			if !lower {
				defer b.throttling.Store(false)
			}
			return b.store.Throttle(ctx, r.RetryAfter, lower)
		})
	}
	if newStated {
		go b.write("error recording the provider's stated limits", func(ctx context.Context) error {
			return b.store.Stated(ctx, stated[0], stated[1])
		})
	}
}

// throttled records a 429 at now and reports whether the recent ones are
// enough to lower the capacity. b.mu is held.
func (b *Capacity) throttled(now time.Time) bool {
	recent := b.throttles[:0]
	for _, at := range b.throttles {
		if now.Sub(at) < throttleWindow {
			recent = append(recent, at)
		}
	}
	b.throttles = append(recent, now)
	return len(b.throttles) >= throttlesToLower
}

// Throttling is how a 429 lowers the deployment's capacity: to Factor of
// what it was, at most once per Damp, never below Floor, climbing back by a
// whole capacity per Recover. A LeaseStore applies it to the shared row.
type Throttling struct {
	Factor, Floor float64
	Recover, Damp time.Duration
}

// ThrottleRule is the reviewed rule (the constants of lease.go).
func ThrottleRule() Throttling {
	return Throttling{Factor: throttleFactor, Floor: factorFloor, Recover: factorRecover, Damp: throttleDamp}
}
