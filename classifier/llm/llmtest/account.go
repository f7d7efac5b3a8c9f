package llmtest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Account is a provider account's rate limits, enforced the way OpenAI
// enforces them on chat completions: requests per minute and tokens per
// minute, each a bucket that refills continuously, shared by every client
// of the account (every worker process of a deployment). A request the
// buckets cannot take now is answered 429 with OpenAI's error body and
// headers, and costs nothing; every answer carries the x-ratelimit-*
// headers.
type Account struct {
	// RPM and TPM are the limits; 0 is no limit of that kind. A request's
	// tokens are its reply's prompt and completion tokens (what usage
	// reports), as OpenAI counts them.
	RPM, TPM int
	// Window is the part of a minute each bucket holds: OpenAI enforces a
	// per-minute limit over shorter periods too (60,000 RPM may be
	// enforced as 1,000 a second), so a client that sends a minute's
	// requests in the first seconds is refused. 0 is one second.
	Window time.Duration
	// RetryAfter adds retry-after-ms to a 429, as some OpenAI-compatible
	// servers do; OpenAI's own sends only the x-ratelimit-* headers.
	RetryAfter bool
}

// SetAccount starts enforcing a's limits (a zero Account stops).
func (s *Server) SetAccount(a Account) {
	if a.Window <= 0 {
		a.Window = time.Second
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account = a
	s.requestsBucket = newBucket(a.RPM, a.Window, now)
	s.tokensBucket = newBucket(a.TPM, a.Window, now)
}

// Throttled returns how many requests were answered 429 because of the
// account's limits.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

// Answered returns how many requests about domain were answered 200: the
// calls the account paid for.
func (s *Server) Answered(domain string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answered[domain]
}

// AnsweredTimes returns when each 200 answer was decided (at the request's
// arrival), in order, and the tokens it counted.
func (s *Server) AnsweredTimes() (times []time.Time, tokens []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.answeredAt...), append([]int(nil), s.answeredTokens...)
}

// AnsweredDomains returns the domain of each 200 answer, in the order of
// AnsweredTimes.
func (s *Server) AnsweredDomains() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answeredDomains...)
}

// PromptTokens is a prompt's size in tokens as a provider would count it,
// about four characters a token: for a fake whose usage grows with the
// prompt (long prompts make the tokens-per-minute limit bind).
func PromptTokens(r Request) int { return (len(r.System) + len(r.User) + 3) / 4 }

// Sized wraps handle so that a 200's prompt tokens are the prompt's size.
func Sized(handle func(Request) Reply) func(Request) Reply {
	return func(r Request) Reply {
		reply := handle(r)
		if reply.Status == 0 || reply.Status == http.StatusOK {
			reply.PromptTokens = PromptTokens(r)
		}
		return reply
	}
}

// bucket is one of the account's limits: it holds up to limit×window/1min
// and refills at limit a minute.
type bucket struct {
	limit    int // a minute; 0: none
	capacity float64
	perSec   float64
	level    float64
	last     time.Time
}

func newBucket(limit int, window time.Duration, now time.Time) *bucket {
	if limit <= 0 {
		return nil
	}
	capacity := math.Max(1, float64(limit)*window.Seconds()/60)
	return &bucket{limit: limit, capacity: capacity, perSec: float64(limit) / 60, level: capacity, last: now}
}

func (b *bucket) refill(now time.Time) {
	b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.perSec)
	b.last = now
}

// wait is how long until n fit.
func (b *bucket) wait(n float64) time.Duration {
	if b.level >= n {
		return 0
	}
	return time.Duration((n - b.level) / b.perSec * float64(time.Second))
}

// header writes the bucket's x-ratelimit-*-kind headers: the limit a
// minute, what is left now, and the time until the bucket is full again.
func (b *bucket) header(h http.Header, kind string) {
	h.Set("x-ratelimit-limit-"+kind, strconv.Itoa(b.limit))
	h.Set("x-ratelimit-remaining-"+kind, strconv.Itoa(int(math.Max(0, b.level))))
	h.Set("x-ratelimit-reset-"+kind, resetText(time.Duration((b.capacity-b.level)/b.perSec*float64(time.Second))))
}

// resetText writes a duration as OpenAI's reset headers do: "20ms",
// "1.5s", "6m0s".
func resetText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", max(d.Milliseconds(), 0))
	}
	return d.Round(time.Millisecond).String()
}

// admit takes a request of tokens from the account's buckets, or returns
// the 429 to answer instead. It writes the rate-limit headers either way.
// Callers hold s.mu.
func (s *Server) admit(h http.Header, model string, tokens int) (refused *Reply) {
	now := time.Now()
	rb, tb := s.requestsBucket, s.tokensBucket
	for _, b := range []*bucket{rb, tb} {
		if b != nil {
			b.refill(now)
		}
	}
	var kind, unit string
	var b *bucket
	var need float64
	switch {
	case rb != nil && rb.level < 1:
		kind, unit, b, need = "requests", "RPM", rb, 1
	case tb != nil && tb.level < float64(tokens):
		kind, unit, b, need = "tokens", "TPM", tb, float64(tokens)
	}
	if b == nil {
		if rb != nil {
			rb.level--
		}
		if tb != nil {
			tb.level -= float64(tokens)
		}
	}
	if rb != nil {
		rb.header(h, "requests")
	}
	if tb != nil {
		tb.header(h, "tokens")
	}
	if b == nil {
		return nil
	}
	s.throttled++
	wait := b.wait(need)
	if s.account.RetryAfter {
		h.Set("retry-after-ms", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	}
	// OpenAI's message and code for a rate limit (not for a spent quota:
	// that is insufficient_quota, which no wait cures).
	msg := fmt.Sprintf("Rate limit reached for %s in organization org-llmtest on %s per min (%s): Limit %d, Used %d, Requested %d. "+
		"Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
		model, kind, unit, b.limit, int(float64(b.limit)*(1-math.Max(0, b.level)/b.capacity)), int(need), resetText(wait))
	return &Reply{Status: http.StatusTooManyRequests, ErrorCode: "rate_limit_exceeded", errorType: kind, message: msg}
}
