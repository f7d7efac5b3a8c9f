package llm

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/domainclass/domainclass/classifier/netguard"
)

// RateLimits is what one response told of the provider account's limits:
// OpenAI's x-ratelimit-* headers, and whether it was a 429. A limit the
// response did not state is 0, a remainder it did not state is -1.
type RateLimits struct {
	// LimitRequests and LimitTokens are the account's limits a minute.
	LimitRequests, LimitTokens int
	// RemainingRequests and RemainingTokens are what the account has left
	// now; ResetRequests and ResetTokens the time until it is whole again.
	RemainingRequests, RemainingTokens int
	ResetRequests, ResetTokens         time.Duration
	// Throttled is a 429 that asks to wait (not a spent quota), for
	// RetryAfter.
	Throttled  bool
	RetryAfter time.Duration
}

// Stated reports whether the response said anything about the limits.
func (r RateLimits) Stated() bool {
	return r.Throttled || r.LimitRequests > 0 || r.LimitTokens > 0 || r.RemainingRequests >= 0 || r.RemainingTokens >= 0
}

// Feedback is told what the provider said of the account's limits after
// every response that said something: the deployment's capacity listens
// (lease.go).
type Feedback interface {
	ProviderSaid(RateLimits)
}

// readRateLimits reads h's x-ratelimit-* headers.
func readRateLimits(h http.Header) RateLimits {
	r := RateLimits{RemainingRequests: -1, RemainingTokens: -1}
	if h == nil {
		return r
	}
	r.LimitRequests = headerInt(h, "x-ratelimit-limit-requests", 0)
	r.LimitTokens = headerInt(h, "x-ratelimit-limit-tokens", 0)
	r.RemainingRequests = headerInt(h, "x-ratelimit-remaining-requests", -1)
	r.RemainingTokens = headerInt(h, "x-ratelimit-remaining-tokens", -1)
	r.ResetRequests = headerDuration(h, "x-ratelimit-reset-requests")
	r.ResetTokens = headerDuration(h, "x-ratelimit-reset-tokens")
	return r
}

// typicalRequestTokens is what a classification request counts against a
// tokens-per-minute limit (the prompt with a homepage's evidence and the
// verdict): the wait after a tokens 429 is the time to refill that much.
const typicalRequestTokens = 1000

// throttleWait is how long a 429 asks to wait: its Retry-After-Ms or
// Retry-After when sent; else, from the x-ratelimit headers, the time until
// the exhausted limit has room for one more request (OpenAI sends no
// Retry-After: its reset headers say when the limit is whole again, which
// is longer); else def. kind is the error's type ("requests", "tokens").
func throttleWait(h http.Header, kind string, r RateLimits, def time.Duration) time.Duration {
	if d, ok := netguard.ParseRetryAfter(h, time.Now()); ok {
		return d
	}
	requests := kind == "requests" || (kind != "tokens" && r.RemainingRequests == 0)
	tokens := kind == "tokens" || (kind != "requests" && r.RemainingTokens == 0)
	switch {
	case requests && r.ResetRequests > 0:
		if r.LimitRequests > 0 {
			return min(r.ResetRequests, time.Minute/time.Duration(r.LimitRequests))
		}
		return r.ResetRequests
	case tokens && r.ResetTokens > 0:
		if r.LimitTokens > 0 {
			return min(r.ResetTokens, time.Duration(float64(time.Minute)*typicalRequestTokens/float64(r.LimitTokens)))
		}
		return r.ResetTokens
	}
	return def
}

func headerInt(h http.Header, name string, def int) int {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return def
	}
	return n
}

// headerDuration reads a reset header: "20ms", "1.5s", "6m0s" (Go's
// duration syntax, which OpenAI's values follow), or plain seconds.
func headerDuration(h http.Header, name string) time.Duration {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 0
}
