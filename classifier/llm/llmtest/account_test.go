package llmtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func post(t *testing.T, s *Server, user string) (*http.Response, apiError) {
	t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":` + strconv.Quote(user) + `}]}`
	resp, err := http.Post(s.BaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var e apiError
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	}
	return resp, e
}

// An account's requests per minute are enforced over its window: a burst
// beyond it gets OpenAI's 429, which is not an answer, and every response
// says where the account stands.
func TestAccount_RequestsPerMinute(t *testing.T) {
	t.Parallel()
	s := New(t, func(Request) Reply { return Answer(true, 5, "x") })
	s.SetAccount(Account{RPM: 600, Window: 2 * time.Second}) // holds 20, refills 10 a second

	codes := map[int]int{}
	var last *http.Response
	var lastErr apiError
	for i := range 25 {
		resp, e := post(t, s, "Domain: a"+strconv.Itoa(i)+".com")
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			last, lastErr = resp, e
		}
	}
	// Within the test's time at most a couple more refill.
	require.GreaterOrEqual(t, codes[http.StatusOK], 20)
	require.LessOrEqual(t, codes[http.StatusOK], 22)
	require.Equal(t, 25-codes[http.StatusOK], s.Throttled())
	require.NotNil(t, last)
	require.Equal(t, "rate_limit_exceeded", lastErr.Error.Code)
	require.Equal(t, "requests", lastErr.Error.Type)
	require.Contains(t, lastErr.Error.Message, "on requests per min (RPM): Limit 600")
	require.Equal(t, "600", last.Header.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "0", last.Header.Get("x-ratelimit-remaining-requests"))
	reset, err := time.ParseDuration(last.Header.Get("x-ratelimit-reset-requests"))
	require.NoError(t, err)
	require.Greater(t, reset, time.Second, "an empty bucket of 20 at 10/s is full again in about 2 s")
	require.Empty(t, last.Header.Get("retry-after-ms"), "OpenAI sends only the x-ratelimit headers")

	total := 0
	times, _ := s.AnsweredTimes()
	for i := range 25 {
		total += s.Answered("a" + strconv.Itoa(i) + ".com")
	}
	require.Equal(t, codes[http.StatusOK], total)
	require.Len(t, times, total)
}

// Tokens per minute count what each answer's usage reports; a request
// whose tokens do not fit is refused whole.
func TestAccount_TokensPerMinute(t *testing.T) {
	t.Parallel()
	s := New(t, Sized(func(Request) Reply { return Answer(true, 5, "x") }))   // 25 completion tokens each
	s.SetAccount(Account{TPM: 60_000, Window: time.Second, RetryAfter: true}) // holds 1,000 tokens
	long := "Domain: long.com\n" + strings.Repeat("evidence ", 200)           // ≈ 450 prompt tokens
	resp, _ := post(t, s, long)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	remaining, err := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-tokens"))
	require.NoError(t, err)
	require.InDelta(t, 1000-25-PromptTokens(Request{User: long}), remaining, 5)
	resp, _ = post(t, s, long)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, e := post(t, s, long)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "tokens", e.Error.Type)
	require.Contains(t, e.Error.Message, "tokens per min (TPM): Limit 60000")
	require.NotEmpty(t, resp.Header.Get("retry-after-ms"))
	resp, _ = post(t, s, "Domain: short.com")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a small request still fits")
	require.Equal(t, 1, s.Throttled())
}
