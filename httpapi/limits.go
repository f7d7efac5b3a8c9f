package httpapi

import (
	"errors"
	"time"
)

// The reviewed per-caller limits and the key cache. Each value is a
// decision with a reason; change one in a reviewed commit, or per
// deployment through the environment (cmd/domainclass/config.go names the
// variables). `domainclass apikey limits` overrides the limits per key.
const (
	// DefaultCallerRatePerMinute: accepted POSTs per caller per minute (a
	// minute's worth may come at once). 120 jobs of up to 10 domains is far
	// more than a worker answers (≈ 3 fresh domains/s ≈ 180/min), so honest
	// batch clients never meet it; a runaway loop does, within a second.
	DefaultCallerRatePerMinute = 120
	// DefaultCallerMaxQueuedDomains: domains of one caller accepted and not
	// yet final. 1000 is ≈ 5 minutes of one worker's fresh capacity (Little:
	// 1000 / 3 per s), so one caller's burst can delay the others by minutes,
	// not hours; cached domains drain in seconds.
	DefaultCallerMaxQueuedDomains = 1000
	// DefaultAuthCacheTTL: a key's lookup is reused this long, so an API
	// process does one key query per caller per 5 s under load, and a revoked
	// key stops working within 5 s.
	DefaultAuthCacheTTL = 5 * time.Second
)

// Limits are a caller's limits: the defaults, or its key's own.
type Limits struct {
	// RatePerMinute is how many jobs a caller may start a minute; it is
	// counted per API process.
	RatePerMinute int
	// MaxQueuedDomains is how many of its domains may be accepted and not
	// yet answered; it is counted in Postgres, across processes.
	MaxQueuedDomains int
}

// DefaultLimits are the reviewed defaults.
func DefaultLimits() Limits {
	return Limits{RatePerMinute: DefaultCallerRatePerMinute, MaxQueuedDomains: DefaultCallerMaxQueuedDomains}
}

// Validate returns an error for a limit below 1.
func (l Limits) Validate() error {
	if l.RatePerMinute < 1 || l.MaxQueuedDomains < 1 {
		return errors.New("RatePerMinute and MaxQueuedDomains must be at least 1")
	}
	return nil
}
