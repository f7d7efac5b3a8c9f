package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db/dbtest"
)

func request(domain string) classifier.CompletionRequest {
	c, _ := classifier.DefaultRegistry().Get("cpg")
	return classifier.CompletionRequest{
		Model: "test-model", System: "sys", User: "Domain: " + domain,
		SchemaName: "cpg_verdict", Schema: c.ResponseSchema(),
	}
}

func newClient(t *testing.T, srv *llmtest.Server, format string) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Timeout: dbtest.Patience(), ResponseFormat: format})
	require.NoError(t, err)
	return c
}

func TestClient_Complete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AsksForJSONSchemaAndReturnsContentAndUsage", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Snacks.") })
		resp, err := newClient(t, srv, "").Complete(ctx, request("acme.com"), classifier.CallOptions{})
		require.NoError(t, err)
		require.JSONEq(t, `{"is_cpg":true,"confidence":5,"reasoning":"Snacks."}`, resp.Content)
		require.Equal(t, 120, resp.PromptTokens)
		require.Equal(t, 25, resp.CompletionTokens)
		require.Equal(t, "test-model", resp.Model)
		require.Equal(t, "json_schema", srv.Requests()[0].ResponseFormat)
		require.Equal(t, "acme.com", srv.Requests()[0].Domain)
	})

	t.Run("FallsBackPerModelWhenServerRejectsResponseFormat", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(r llmtest.Request) llmtest.Reply {
			if r.ResponseFormat == "json_schema" || r.ResponseFormat == "json_object" {
				return llmtest.Status(http.StatusBadRequest, nil) // a server with no JSON mode at all
			}
			return llmtest.Answer(false, 4, "Software.")
		})
		c := newClient(t, srv, "auto")
		_, err := c.Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.NoError(t, err)
		_, err = c.Complete(ctx, request("b.com"), classifier.CallOptions{})
		require.NoError(t, err)

		var formats []string
		for _, r := range srv.Requests() {
			formats = append(formats, r.ResponseFormat)
		}
		// The first call steps down twice; the second remembers.
		require.Equal(t, []string{"json_schema", "json_object", "", ""}, formats)
	})

	t.Run("FixedFormatDoesNotFallBack", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusBadRequest, nil) })
		_, err := newClient(t, srv, "json_schema").Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.True(t, classifier.IsPermanent(err), "want a permanent error, got %v", err)
		require.Equal(t, 1, srv.Total())
	})

	t.Run("RateLimitCarriesRetryAfterAndIsNotRetriedBySDK", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
			return llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "7"})
		})
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		after, ok := classifier.RetryAfter(err)
		require.True(t, ok, "want a rate-limit error, got %v", err)
		require.Equal(t, 7*time.Second, after)
		require.Equal(t, 1, srv.Total(), "River owns retries, not the SDK")
	})

	t.Run("RateLimitPrefersRetryAfterMs", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
			return llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"})
		})
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		after, ok := classifier.RetryAfter(err)
		require.True(t, ok)
		require.Equal(t, 1500*time.Millisecond, after)
	})

	t.Run("InsufficientQuotaIsNotAThrottle", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Status: http.StatusTooManyRequests, ErrorCode: "insufficient_quota"}
		})
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.Error(t, err)
		_, throttled := classifier.RetryAfter(err)
		require.False(t, throttled, "a quota error must use up attempts, not snooze forever")
		require.False(t, classifier.IsPermanent(err))
	})

	t.Run("ServerErrorIsTransient", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusBadGateway, nil) })
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.Error(t, err)
		require.False(t, classifier.IsPermanent(err))
		_, throttled := classifier.RetryAfter(err)
		require.False(t, throttled)
		require.Equal(t, 1, srv.Total())
	})

	t.Run("BadKeyIsPermanentAndDoesNotLeakTheKey", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusUnauthorized, nil) })
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.True(t, classifier.IsPermanent(err))
		require.NotContains(t, err.Error(), "sk-test")
	})

	t.Run("GarbageBodyIsAnError", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Raw: "<html>oops"} })
		_, err := newClient(t, srv, "").Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.Error(t, err)
	})

	t.Run("TimeoutIsTransient", func(t *testing.T) {
		t.Parallel()
		block := make(chan struct{})
		defer close(block)
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Wait: block} })
		c, err := llm.New(llm.Config{BaseURL: srv.BaseURL(), APIKey: "k", Timeout: 100 * time.Millisecond})
		require.NoError(t, err)
		_, err = c.Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.Error(t, err)
		require.False(t, classifier.IsPermanent(err))
	})
}

func TestLimit(t *testing.T) {
	t.Parallel()

	t.Run("BoundsConcurrency", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
			r := llmtest.Answer(true, 5, "x")
			r.Wait = release
			return r
		})
		limited := llm.Limit(newClient(t, srv, ""), 3, 60_000, nil)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { _, _ = limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{}) })
		}
		require.Eventually(t, func() bool { return srv.Total() == 3 }, dbtest.Patience(), 5*time.Millisecond)
		close(release)
		wg.Wait()
		require.Equal(t, 10, srv.Total())
		require.Equal(t, 3, srv.MaxInFlight())
	})

	t.Run("SpacesCallsByRate", func(t *testing.T) {
		t.Parallel()
		// Record when the limiter lets each call through (the seam after it),
		// not when a server sees it: connection setup would blur the spacing.
		var (
			mu     sync.Mutex
			starts []time.Time
		)
		next := completerFunc(func(context.Context, classifier.CompletionRequest) (classifier.CompletionResponse, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return classifier.CompletionResponse{}, nil
		})
		limited := llm.Limit(next, 10, 1200, nil) // one call per 50 ms
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() { _, _ = limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{}) })
		}
		wg.Wait()
		require.Len(t, starts, 5)
		first, last := starts[0], starts[0]
		for _, s := range starts {
			first, last = minTime(first, s), maxTime(last, s)
		}
		// 5 calls at 20/s take 4 intervals (200 ms); without the limit they
		// would take microseconds. The slack is for goroutine scheduling.
		require.GreaterOrEqual(t, last.Sub(first), 150*time.Millisecond)
	})

	t.Run("GivesUpWhenContextEnds", func(t *testing.T) {
		t.Parallel()
		block := make(chan struct{})
		defer close(block)
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Wait: block} })
		limited := llm.Limit(newClient(t, srv, ""), 1, 60_000, nil)
		go func() { _, _ = limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{}) }()
		require.Eventually(t, func() bool { return srv.Total() == 1 }, dbtest.Patience(), 5*time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := limited.Complete(ctx, request("b.com"), classifier.CallOptions{})
		require.True(t, errors.Is(err, context.Canceled))
	})
}

// TestLimit_CallOptions: what a worker passes with a call decides its
// turn and whether it starts; nothing rides in the context.
func TestLimit_CallOptions(t *testing.T) {
	t.Parallel()

	t.Run("AGateThatRefusesStopsTheCallBeforeTheModel", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") })
		limited := llm.Limit(newClient(t, srv, ""), 1, 60_000, nil)
		ended := errors.New("list ended")
		gate := func(context.Context) (func(), error) { return nil, ended }
		_, err := limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{Gate: gate})
		require.ErrorIs(t, err, ended)
		require.Equal(t, 0, srv.Total(), "a refused call must not reach the model")
	})

	t.Run("AGateIsReleasedOnceTheRequestIsWritten", func(t *testing.T) {
		t.Parallel()
		answer := make(chan struct{})
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
			r := llmtest.Answer(true, 5, "x")
			r.Wait = answer
			return r
		})
		limited := llm.Limit(newClient(t, srv, ""), 1, 60_000, nil)
		released := make(chan struct{})
		gate := func(context.Context) (func(), error) { return func() { close(released) }, nil }
		done := make(chan error, 1)
		go func() {
			_, err := limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{Gate: gate})
			done <- err
		}()
		select { // the model has not answered yet: the gate is let go as the request is sent
		case <-released:
		case <-time.After(dbtest.Patience()):
			t.Fatal("the gate was not released while the model was thinking")
		}
		close(answer)
		require.NoError(t, <-done)
	})

	t.Run("AListsShareTakesAListSlot", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") })
		obs := &slotRecorder{}
		limited := llm.Limit(newClient(t, srv, ""), 2, 60_000, obs)
		list := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "l1"}
		_, err := limited.Complete(context.Background(), request("a.com"), classifier.CallOptions{Share: list})
		require.NoError(t, err)
		_, err = limited.Complete(context.Background(), request("b.com"), classifier.CallOptions{})
		require.NoError(t, err)
		require.Equal(t, []classifier.CallClass{classifier.ClassList, classifier.ClassInteractive}, obs.waited,
			"the first call is the list's, the second (no share) interactive")
	})
}

// slotRecorder records the class of each call that got a slot.
type slotRecorder struct {
	mu     sync.Mutex
	waited []classifier.CallClass
}

func (r *slotRecorder) ObserveSlotsInUse(classifier.CallClass, int) {}

func (r *slotRecorder) ObserveSlotWait(c classifier.CallClass, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waited = append(r.waited, c)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// completerFunc is a Completer made of a function: a fake at the seam
// behind the limiter.
type completerFunc func(context.Context, classifier.CompletionRequest) (classifier.CompletionResponse, error)

func (f completerFunc) Complete(ctx context.Context, req classifier.CompletionRequest, _ classifier.CallOptions) (classifier.CompletionResponse, error) {
	return f(ctx, req)
}

// saidRecorder keeps what the client was told of the rate limits.
type saidRecorder struct {
	mu   sync.Mutex
	said []llm.RateLimits
}

func (r *saidRecorder) ProviderSaid(l llm.RateLimits) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said = append(r.said, l)
}

func TestClient_RateLimitHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// OpenAI answers a 429 with its x-ratelimit headers and no Retry-After:
	// the wait is the time until the account has room for one request, not
	// a default of seconds, nor the time until the limit is whole.
	t.Run("A429WithoutRetryAfterWaitsForOneRequestsRoom", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") })
		srv.SetAccount(llmtest.Account{RPM: 60, Window: 3 * time.Second}) // holds 3, one more a second
		c := newClient(t, srv, "")
		var err error
		for range 4 {
			if _, err = c.Complete(ctx, request("a.com"), classifier.CallOptions{}); err != nil {
				break
			}
		}
		after, ok := classifier.RetryAfter(err)
		require.True(t, ok, "want a rate-limit error, got %v", err)
		require.Greater(t, after, 900*time.Millisecond)
		require.LessOrEqual(t, after, time.Second, "the limit is whole again in about 3 s; one request fits in 1 s")
	})

	t.Run("TellsTheFeedbackWhatEachResponseSaid", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Sized(func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "x") }))
		srv.SetAccount(llmtest.Account{RPM: 600, TPM: 120_000, Window: 100 * time.Millisecond}) // holds 1 request
		rec := &saidRecorder{}
		c, err := llm.New(llm.Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Feedback: rec})
		require.NoError(t, err)
		_, err = c.Complete(ctx, request("a.com"), classifier.CallOptions{})
		require.NoError(t, err)
		_, err = c.Complete(ctx, request("b.com"), classifier.CallOptions{})
		_, throttled := classifier.RetryAfter(err)
		require.True(t, throttled, "the second request in 100 ms is over the account's limit: %v", err)

		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Len(t, rec.said, 2)
		ok, refused := rec.said[0], rec.said[1]
		require.Equal(t, 600, ok.LimitRequests)
		require.Equal(t, 120_000, ok.LimitTokens)
		require.Equal(t, 0, ok.RemainingRequests)
		require.Greater(t, ok.RemainingTokens, 0)
		require.Greater(t, ok.ResetRequests, time.Duration(0))
		require.False(t, ok.Throttled)
		require.True(t, refused.Throttled)
		require.Positive(t, refused.RetryAfter)
		require.LessOrEqual(t, refused.RetryAfter, 100*time.Millisecond, "one request's room at 10 a second, at most")
	})
}

// A client with Conns calls in flight keeps that many connections: calls
// that end together do not each dial a new one for the next round (Go's
// default keeps two, and the rest would dial, and shake TLS hands, again).
func TestClient_KeepsItsConnections(t *testing.T) {
	t.Parallel()
	const conns, rounds = 16, 4
	model := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Snacks.") })
	var dialed atomic.Int64
	srv := httptest.NewUnstartedServer(model.Config.Handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Timeout: dbtest.Patience(), Conns: conns})
	require.NoError(t, err)
	for range rounds {
		var g errgroup.Group
		for i := range conns {
			g.Go(func() error {
				_, err := c.Complete(context.Background(), request(fmt.Sprintf("d%d.com", i)), classifier.CallOptions{})
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	require.LessOrEqual(t, dialed.Load(), int64(conns+conns/2), "connections dialed for %d rounds of %d calls", rounds, conns)
}
