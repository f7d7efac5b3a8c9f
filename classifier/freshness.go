package classifier

import (
	"errors"
	"time"
)

// The reviewed cache policy: how long an answer is served again, by its
// confidence. Change one in a reviewed commit, or per deployment through
// the environment (cmd/domainclass/config.go names the variables).
const (
	// DefaultCacheTTLHigh: answers with confidence 4–5 are reused for 60
	// days: what a company sells changes slowly.
	DefaultCacheTTLHigh = 60 * 24 * time.Hour
	// DefaultCacheTTLMedium: confidence 2–3 answers are reused for 30 days,
	// so doubtful answers are asked again sooner.
	DefaultCacheTTLMedium = 30 * 24 * time.Hour
	// DefaultCacheTTLLow: confidence 1 is no answer; it is never reused.
	DefaultCacheTTLLow = 0
)

// Freshness says how long a cached answer may be reused, by confidence.
// A zero duration means never. FAILED answers are never reused.
type Freshness struct {
	High   time.Duration // confidence 4-5
	Medium time.Duration // confidence 2-3
	Low    time.Duration // confidence 1
}

// DefaultFreshness is the reviewed cache policy.
func DefaultFreshness() Freshness {
	return Freshness{High: DefaultCacheTTLHigh, Medium: DefaultCacheTTLMedium, Low: DefaultCacheTTLLow}
}

// Validate returns an error for a negative duration.
func (f Freshness) Validate() error {
	if f.High < 0 || f.Medium < 0 || f.Low < 0 {
		return errors.New("High, Medium and Low must not be negative")
	}
	return nil
}

// Fresh reports whether r may be served again at now.
func (f Freshness) Fresh(r *Result, now time.Time) bool {
	if r == nil || r.Status != StatusCompleted {
		return false
	}
	var ttl time.Duration
	switch {
	case r.Confidence >= 4:
		ttl = f.High
	case r.Confidence >= 2:
		ttl = f.Medium
	default:
		ttl = f.Low
	}
	return ttl > 0 && now.Sub(r.ClassifiedAt) < ttl
}

// Want is what one request accepts as fresh, on top of the Freshness of
// the deployment: an answer no older than MaxAge (0: any age the TTLs
// allow), and made at Since or after (zero: any time). A refresh is a Want
// whose Since is the request's own time: the answer must be new, and one
// that another request made meanwhile is new enough.
type Want struct {
	MaxAge time.Duration
	Since  time.Time
}

// Accepts reports whether r, fresh by the deployment's TTLs, is fresh
// enough for the request.
func (w Want) Accepts(r *Result, now time.Time) bool {
	if w.MaxAge > 0 && now.Sub(r.ClassifiedAt) >= w.MaxAge {
		return false
	}
	return w.Since.IsZero() || !r.ClassifiedAt.Before(w.Since)
}
