package httpapi

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
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

type bucket struct {
	perMinute int
	lim       *rate.Limiter
}

func newCallerLimiter(now func() time.Time) *callerLimiter {
	if now == nil {
		now = time.Now
	}
	return &callerLimiter{buckets: map[string]*bucket{}, now: now}
}

// admission is a token taken for a request; cancel gives it back when the
// request wrote nothing.
type admission struct {
	r   *rate.Reservation
	now func() time.Time
}

func (a admission) cancel() { a.r.CancelAt(a.now()) }

// reserve takes a token for caller. When none is left it returns false and
// how long until one is.
func (l *callerLimiter) reserve(caller string, perMinute int) (admission, bool, time.Duration) {
	l.mu.Lock()
	b, ok := l.buckets[caller]
	if !ok || b.perMinute != perMinute {
		b = &bucket{perMinute: perMinute, lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)}
		l.buckets[caller] = b
	}
	l.mu.Unlock()
	now := l.now()
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return admission{}, false, d
	}
	return admission{r: r, now: l.now}, true, 0
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
