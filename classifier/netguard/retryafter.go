package netguard

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter reads how long a peer asked us to wait: Retry-After-Ms
// (OpenAI's), then Retry-After as seconds or an HTTP date. It reports false
// when neither is usable. The model client, the search provider, webhook
// deliveries and the API client all read it here.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
