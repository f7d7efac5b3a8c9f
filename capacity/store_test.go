package capacity_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/capacity"
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// leaseProc is one worker process's model bounds, as app.go wires them:
// an OpenAI client telling its capacity what the provider says, limited by
// the process's caps, governed by the deployment's capacity in Postgres.
type leaseProc struct {
	lim      *llm.Limited
	capacity *llm.Capacity
	stop     context.CancelFunc
	done     chan struct{}
}

type leaseSetup struct {
	t       *testing.T
	d       *db.DB
	fake    *llmtest.Server
	account llm.CapacityConfig
	// release is false to make a process that stops give nothing back, as
	// one killed with SIGKILL does.
	release bool
}

func newLeaseSetup(t *testing.T, fake *llmtest.Server, account llm.CapacityConfig) *leaseSetup {
	return &leaseSetup{t: t, d: dbtest.New(t), fake: fake, account: account, release: true}
}

// start starts a process with its own caps (LLM_MAX_CONCURRENCY,
// LLM_RATE_PER_MINUTE).
func (s *leaseSetup) start(name string, concurrency, perMinute int) *leaseProc {
	s.t.Helper()
	var store llm.LeaseStore = capacity.AccountStore{DB: s.d.Pool, ID: "acct", Name: "fake"}
	if !s.release {
		store = keepLease{store}
	}
	cfg := s.account
	cfg.Holder, cfg.TTL = name, time.Second
	capacity := llm.NewCapacity(cfg, store)
	client, err := llm.New(llm.Config{BaseURL: s.fake.BaseURL(), APIKey: "sk-test", Timeout: 10 * time.Second, Feedback: capacity})
	require.NoError(s.t, err)
	p := &leaseProc{lim: llm.Limit(client, concurrency, perMinute, nil), capacity: capacity, done: make(chan struct{})}
	capacity.Govern(p.lim)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = func() { cancel(); <-p.done }
	go func() { defer close(p.done); capacity.Run(ctx) }()
	s.t.Cleanup(p.stop)
	return p
}

// keepLease is a store whose leases are never given up.
type keepLease struct{ llm.LeaseStore }

func (keepLease) Release(context.Context, string) error { return nil }

// calls makes n calls through p, workers at a time, and returns the errors.
func (p *leaseProc) calls(ctx context.Context, prefix string, n, workers int) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				_, err := p.lim.Complete(ctx, completion(fmt.Sprintf("%s%d.com", prefix, i)), classifier.CallOptions{})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

func completion(domain string) classifier.CompletionRequest {
	return classifier.CompletionRequest{Model: "m", System: "sys", User: "Domain: " + domain}
}

// Two worker processes, each allowed the account's whole rate by its own
// settings (as an autoscaler starts them), send the account no more than
// its limit together: the provider refuses nothing.
func TestCapacity_TwoProcessesShareTheAccountsRate(t *testing.T) {
	t.Parallel()
	fake := llmtest.New(t, llmtest.Steady(true, 4, "x", 20*time.Millisecond))
	fake.SetAccount(llmtest.Account{RPM: 1200, Window: time.Second}) // 20 a second, 20 at once
	s := newLeaseSetup(t, fake, llm.CapacityConfig{RequestsPerMinute: 1200})
	a, b := s.start("a", 8, 1200), s.start("b", 8, 1200)

	var wg sync.WaitGroup
	var errs [2][]error
	wg.Go(func() { errs[0] = a.calls(context.Background(), "a", 50, 8) })
	wg.Go(func() { errs[1] = b.calls(context.Background(), "b", 50, 8) })
	wg.Wait()
	require.LessOrEqual(t, fake.Throttled(), 1, "429s of 100 calls at the account's limit")
	require.LessOrEqual(t, len(errs[0])+len(errs[1]), 1)
}

// Tokens a minute hold for the deployment too: each call's tokens are
// estimated from its prompt before it starts and corrected from its usage.
func TestCapacity_TwoProcessesShareTheAccountsTokens(t *testing.T) {
	t.Parallel()
	fake := llmtest.New(t, llmtest.Sized(llmtest.Steady(true, 4, "x", 20*time.Millisecond)))
	fake.SetAccount(llmtest.Account{TPM: 120_000, Window: time.Second}) // 2,000 tokens a second, 2,000 at once
	s := newLeaseSetup(t, fake, llm.CapacityConfig{TokensPerMinute: 120_000})
	a, b := s.start("a", 8, 60_000), s.start("b", 8, 60_000)
	long := func(p *leaseProc, prefix string) []error { // about 250 tokens a call: 8 a second for the account
		var errs []error
		for i := range 10 {
			req := completion(fmt.Sprintf("%s%d.com", prefix, i))
			req.User += "\n" + strings.Repeat("evidence ", 100)
			if _, err := p.lim.Complete(context.Background(), req, classifier.CallOptions{}); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	var wg sync.WaitGroup
	var errs [2][]error
	for i, p := range []*leaseProc{a, b} {
		wg.Go(func() {
			var inner sync.WaitGroup
			var mu sync.Mutex
			for w := range 4 {
				inner.Go(func() {
					e := long(p, fmt.Sprintf("p%dw%d-", i, w))
					mu.Lock()
					errs[i] = append(errs[i], e...)
					mu.Unlock()
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
	require.LessOrEqual(t, fake.Throttled(), 2, "429s of 80 calls of about 250 tokens at the account's 2,000 a second")
}

// The calls in flight of the whole deployment stay within the account's.
func TestCapacity_CallsInFlightForTheDeployment(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	fake := llmtest.New(t, func(llmtest.Request) llmtest.Reply {
		r := llmtest.Answer(true, 5, "x")
		r.Wait = release
		return r
	})
	s := newLeaseSetup(t, fake, llm.CapacityConfig{Concurrency: 3})
	a, b := s.start("a", 8, 60_000), s.start("b", 8, 60_000)
	var wg sync.WaitGroup
	wg.Go(func() { a.calls(context.Background(), "a", 10, 10) })
	wg.Go(func() { b.calls(context.Background(), "b", 10, 10) })
	require.Eventually(t, func() bool { return fake.InFlight() == 3 }, dbtest.Patience(), 5*time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, 20, fake.Total())
	require.Equal(t, 3, fake.MaxInFlight(), "LLM_ACCOUNT_CONCURRENCY=3 for two processes of 8 slots each")
}

// A process killed while it holds the whole capacity gives it back when its
// lease expires: the other holds it all again seconds later.
func TestCapacity_KilledProcessesShareComesBack(t *testing.T) {
	t.Parallel()
	fake := llmtest.New(t, llmtest.Steady(true, 4, "x", 10*time.Millisecond))
	s := newLeaseSetup(t, fake, llm.CapacityConfig{RequestsPerMinute: 600})
	s.release = false
	a := s.start("a", 20, 600)
	require.Eventually(t, func() bool { return a.capacity.Share() > 0.99 }, dbtest.Patience(), 10*time.Millisecond, "alone, a holds it all")
	b := s.start("b", 20, 600)
	require.Eventually(t, func() bool { return b.capacity.Share() > 0.4 }, dbtest.Patience(), 10*time.Millisecond, "idle, they share evenly")
	a.stop() // its lease stays, as a killed process's does
	killed := time.Now()
	require.Eventually(t, func() bool { return b.capacity.Share() > 0.99 }, dbtest.Patience(), 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(killed), 500*time.Millisecond, "a's lease was live for a while (TTL 1 s)")
}

// A 429 one process gets stops the calls of every process for its wait,
// once they hear of it (at their next renewal, a fraction of a second).
func TestCapacity_A429SlowsTheWholeDeployment(t *testing.T) {
	t.Parallel()
	var (
		mu        sync.Mutex
		refusedAt time.Time
		arrivals  []time.Time // b's
	)
	fake := llmtest.New(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if r.Domain == "first0.com" {
			refusedAt = time.Now()
			return llmtest.Status(http.StatusTooManyRequests, map[string]string{"retry-after-ms": "2000"})
		}
		arrivals = append(arrivals, time.Now())
		return llmtest.Answer(true, 4, "x")
	})
	s := newLeaseSetup(t, fake, llm.CapacityConfig{RequestsPerMinute: 1200})
	a, b := s.start("a", 4, 1200), s.start("b", 4, 1200)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = b.lim.Complete(ctx, completion(fmt.Sprintf("second%d.com", i)), classifier.CallOptions{})
		}
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(arrivals) > 0 }, dbtest.Patience(), time.Millisecond)
	errs := a.calls(context.Background(), "first", 1, 1)
	require.Len(t, errs, 1)
	_, throttled := classifier.RetryAfter(errs[0])
	require.True(t, throttled)
	mu.Lock()
	t0 := refusedAt
	mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return arrivals[len(arrivals)-1].After(t0.Add(2 * time.Second))
	}, dbtest.Patience(), 5*time.Millisecond, "b calls again once the wait is over")
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, at := range arrivals {
		if at.After(t0.Add(500*time.Millisecond)) && at.Before(t0.Add(1900*time.Millisecond)) {
			t.Fatalf("b called %s after a's 429, which asked for 2 s: once heard of, a 429 stops every process", at.Sub(t0))
		}
	}
}

// The limits the provider states in its headers bind when they are lower
// than the configured ones.
func TestCapacity_ProvidersStatedLimitBinds(t *testing.T) {
	t.Parallel()
	fake := llmtest.New(t, llmtest.Steady(true, 4, "x", 10*time.Millisecond))
	fake.SetAccount(llmtest.Account{RPM: 600, Window: 2 * time.Second}) // 10 a second, 20 at once
	s := newLeaseSetup(t, fake, llm.CapacityConfig{RequestsPerMinute: 2400})
	a, b := s.start("a", 8, 2400), s.start("b", 8, 2400)
	var wg sync.WaitGroup
	wg.Go(func() { a.calls(context.Background(), "a", 30, 8) })
	wg.Go(func() { b.calls(context.Background(), "b", 30, 8) })
	wg.Wait()
	require.LessOrEqual(t, fake.Throttled(), 6, "429s of 60 calls at 4× the stated limit, before it was heard")
}
