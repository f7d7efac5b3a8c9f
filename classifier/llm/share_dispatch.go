package llm

import (
	"math"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// dispatch grants free slots to waiting calls while the cool-down, the
// rate and the tokens allow; when they do not, a timer calls dispatch
// again once they will.
func (s *scheduler) dispatch() {
	for s.busy < s.slots {
		w := s.next()
		if w == nil {
			return
		}
		now := time.Now()
		if now.Before(s.cooldown) {
			s.wakeIn(s.cooldown.Sub(now))
			return
		}
		s.requests.refill(now)
		s.tokens.refill(now)
		var reserve [2]float64
		if w.share.Class == classifier.ClassList {
			reserve = s.reserve
		}
		var pace *bucket
		if w.share.Class == classifier.ClassList {
			pace = s.listPace(now)
		}
		if wait := max(s.requests.wait(1+reserve[0]), s.tokens.wait(w.tokens+reserve[1]), pace.wait(1)); wait > 0 {
			s.wakeIn(wait)
			return
		}
		s.take(w)
		pace.take(1)
		s.requests.take(1)
		s.tokens.take(w.tokens)
		s.busy++
		s.inUse[w.share.Class]++
		if w.share.Class == classifier.ClassList {
			c := s.callers[w.share.Caller]
			c.inUse++
			c.lists[w.share.List].inUse++
		}
		w.granted = true
		close(w.ready)
		s.observe(w.share.Class)
	}
}

// paceList records that a list call held its slot for held: the moving
// mean of that length sets the pace of list calls' starts (listPace). s.mu
// is held.
func (s *scheduler) paceList(held time.Duration) {
	if s.held == 0 {
		s.held = held.Seconds()
		return
	}
	s.held += heldWeight * (held.Seconds() - s.held)
}

// listPace returns the bucket that paces list calls' starts, at now's
// slots: as many starts a second as calls of the mean length free
// (slots ÷ mean), with paceHeadroom, and a burst of an eighth of the slots;
// nil until a list call has returned.
//
// Without it, list calls that take as long (a provider's steady latency)
// start together and end together, and the calls queued behind them take
// the freed slots together again: the slots free in waves, and an
// interactive call that asks between two waves waits for the next, however
// many slots the lists hold (issue 37: the `all` p95 beside a list went
// from 1.01× idle to 1.5× once list calls stopped opening a transaction
// each, which had spread their starts by chance). Paced, their starts
// spread over a call's length and a slot frees every few milliseconds. The
// headroom keeps the pace from binding when lengths vary: the slots do. s.mu
// is held.
func (s *scheduler) listPace(now time.Time) *bucket {
	if s.held == 0 {
		return nil
	}
	slots := float64(max(1, s.slots))
	perSec, burst := paceHeadroom*slots/s.held, math.Max(1, slots/8)
	if s.pace == nil {
		s.pace = newBucket(perSec, burst, now)
	} else {
		s.pace.set(perSec, burst, now)
	}
	return s.pace
}

const (
	// paceHeadroom: list calls may start a quarter faster than their slots
	// free on average, so that the pace spreads a wave out within a call's
	// length without holding slots idle when lengths vary.
	paceHeadroom = 1.25
	// heldWeight: each list call moves the mean length by a tenth of its
	// difference: about the last ten calls, a few of a chunk's.
	heldWeight = 0.1
)

// wakeIn makes dispatch run again in d, unless a timer runs it sooner.
func (s *scheduler) wakeIn(d time.Duration) {
	at := time.Now().Add(d)
	if s.timer != nil && !s.timerAt.After(at) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if d > time.Hour {
		s.timer = nil // a rate of 0: setLimits dispatches when it changes
		return
	}
	s.timerAt = at
	s.timer = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		s.dispatch()
	})
}

// next returns the call to serve next; nil when none waits.
func (s *scheduler) next() *waiter {
	if len(s.interactive) > 0 {
		return s.interactive[0]
	}
	// The caller first, then its list.
	var bestC *callerShare
	for _, c := range s.callers {
		if c.waiting() && (bestC == nil || s.before(c, bestC)) {
			bestC = c
		}
	}
	if bestC == nil {
		return nil
	}
	var best *listShare
	for _, l := range bestC.lists {
		if len(l.waiting) == 0 {
			continue
		}
		if best == nil || l.inUse < best.inUse || (l.inUse == best.inUse && l.waiting[0].since.Before(best.waiting[0].since)) {
			best = l
		}
	}
	return best.waiting[0]
}

// take takes w, which next returned, out of its queue.
func (s *scheduler) take(w *waiter) {
	if w.share.Class != classifier.ClassList {
		s.interactive = s.interactive[1:]
		return
	}
	c := s.callers[w.share.Caller]
	l := c.lists[w.share.List]
	l.waiting = l.waiting[1:]
	s.grants++
	c.lastGrant = s.grants
}

// before reports whether caller c is served before caller bc: the caller
// holding fewer slots for its weight first; between equals, the one served
// longer ago, in turn. Not the one with more lists, nor the one whose call
// waited longer: a caller with two lists asks twice as often, so each of
// its lists holds fewer slots than the other caller's one and its oldest
// call is older, and when ties went either way that caller won every tie
// (with an odd number of slots, 3 of 5 for good).
func (s *scheduler) before(c, bc *callerShare) bool {
	if a, b := float64(c.inUse)/s.weight(c.name), float64(bc.inUse)/s.weight(bc.name); a != b {
		return a < b
	}
	if c.lastGrant != bc.lastGrant {
		return c.lastGrant < bc.lastGrant
	}
	return c.name < bc.name
}

// waiting reports whether a call of one of c's lists waits.
func (c *callerShare) waiting() bool {
	for _, l := range c.lists {
		if len(l.waiting) > 0 {
			return true
		}
	}
	return false
}

// weight is a caller's weight: the capacity's, or 1 (the weights are
// normalised to a mean of 1) for a caller it does not know yet.
func (s *scheduler) weight(caller string) float64 {
	if w, ok := s.weights[caller]; ok && w > 0 {
		return w
	}
	return 1
}
