package httpapi

import (
	"math"
	"sync"
	"time"
)

// callerLimiter keeps one token bucket per caller: perMinute accepted
// requests a minute, a minute's worth at once. It is per API process; the
// queued-domains limit, kept in Postgres, is the one that holds across
// processes.
type callerLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	// now is the limiter's clock: time.Now, or a test's, so that a test
	// of the rate does not depend on how fast the machine sends requests.
	now func() time.Time
}

// bucket holds tokens, up to perMinute, refilled at perMinute a minute.
// (Not x/time/rate's Limiter: a reservation it cancels is given back only
// before the reservation's time, so a request that is refused after the
// rate check, a few milliseconds later, would keep its token.)
type bucket struct {
	perMinute int
	tokens    float64
	at        time.Time // when tokens was last refilled
}

// refill adds the tokens earned since b.at.
func (b *bucket) refill(now time.Time) {
	if now.After(b.at) {
		b.tokens = math.Min(float64(b.perMinute), b.tokens+now.Sub(b.at).Minutes()*float64(b.perMinute))
		b.at = now
	}
}

func newCallerLimiter(now func() time.Time) *callerLimiter {
	if now == nil {
		now = time.Now
	}
	return &callerLimiter{buckets: map[string]*bucket{}, now: now}
}

// rateToken is a token taken for a request; cancel gives it back when the
// request wrote nothing.
type rateToken struct {
	l *callerLimiter
	b *bucket
}

// cancel gives the token back, whenever that is: the request that took it
// was not accepted, so it does not count toward the caller's rate.
func (a rateToken) cancel() {
	if a.b == nil {
		return
	}
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	a.b.refill(a.l.now())
	a.b.tokens = math.Min(float64(a.b.perMinute), a.b.tokens+1)
}

// reserve takes a token for caller. When none is left it returns false and
// how long until one is.
func (l *callerLimiter) reserve(caller string, perMinute int) (rateToken, bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[caller]
	if !ok || b.perMinute != perMinute {
		b = &bucket{perMinute: perMinute, tokens: float64(perMinute), at: now}
		l.buckets[caller] = b
	}
	b.refill(now)
	if b.tokens < 1 {
		return rateToken{}, false, time.Duration((1 - b.tokens) / float64(perMinute) * float64(time.Minute))
	}
	b.tokens--
	return rateToken{l: l, b: b}, true, 0
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
