package llm

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// The reviewed bounds on model calls, per worker process. Sizes come from
// Little's law, L = λ·W: the calls in flight equal the arrival rate times
// the time each takes. A fresh domain costs about W = 2–3 s (search ≈ 0.5–1
// s + model ≈ 1.5 s), so 8 calls in flight serve λ ≈ 3 domains/s (≈ 190 a
// minute), under the rate limit. Change one in a reviewed commit, or per
// deployment through the environment.
const (
	// DefaultMaxConcurrency: 8 calls in flight saturate a small-tier
	// provider account without queueing hundreds of requests on its side; a
	// burst of 500 jobs still means 8.
	DefaultMaxConcurrency = 8
	// DefaultRatePerMinute: 300 leaves 40% headroom under a 500 RPM tier
	// and caps spend if latency drops (8 slots at 0.5 s would be 960/min).
	DefaultRatePerMinute = 300
)

// Limited bounds the calls of a Completer for the whole process: at most
// concurrency in flight, started no faster than perMinute, and shared
// between interactive jobs and lists as the scheduler says (share.go).
// Governed by a Capacity, those are this process's caps, and the deployment's
// capacity bounds it further (lease.go).
type Limited struct {
	next   classifier.Completer
	slots  *scheduler
	tokens *tokenEstimator
	// The process's own caps.
	concurrency int
	perMinute   int
}

// Limit wraps next in the process-wide bounds; obs, if not nil, is told
// how the slots are used.
func Limit(next classifier.Completer, concurrency, perMinute int, obs SlotObserver) *Limited {
	// A bucket of one spaces calls evenly: the rate is never exceeded, even
	// in the first second of a burst of jobs.
	requests := newBucket(float64(perMinute)/60, 1, time.Now())
	return &Limited{next: next, slots: newScheduler(concurrency, requests, obs), tokens: newTokenEstimator(),
		concurrency: concurrency, perMinute: perMinute}
}

// Stop makes every call that has not started, and every call asked from
// now on, fail with ErrStopping; the calls in flight go on. A worker
// process calls it as it begins to stop.
func (l *Limited) Stop() { l.slots.stop() }

// Stopping returns ErrStopping once Stop was called, else nil: the
// pipeline asks before a domain's look-ups and search, so that a stopping
// process gives the rest of its domains back at once.
func (l *Limited) Stopping() error {
	l.slots.mu.Lock()
	defer l.slots.mu.Unlock()
	if l.slots.stopping {
		return ErrStopping
	}
	return nil
}

// Complete waits for a slot, the rate and the tokens, in call.Share's
// turn (zero: interactive), asks call.Gate, if any (a list's joins, or opens, the
// Postgres transaction its calls of the moment share, held until their
// requests are written), and then
// calls the model. The call's tokens are estimated from its prompt before
// it starts and corrected from its usage once it ends (given back when no
// answer came). It returns ErrStopping once Stop was called, the gate's
// refusal wrapped, and the model's errors.
func (l *Limited) Complete(ctx context.Context, req classifier.CompletionRequest, call classifier.CallOptions) (classifier.CompletionResponse, error) {
	estimate := l.tokens.estimate(req)
	share := call.Share
	if share.Class == "" {
		share = classifier.Share{Class: classifier.ClassInteractive}
	}
	release, err := l.slots.acquire(ctx, share, estimate)
	if err != nil {
		return classifier.CompletionResponse{}, err
	}
	defer release()
	if call.Gate != nil {
		release, err := call.Gate(ctx)
		if err != nil {
			l.slots.correct(-estimate)
			return classifier.CompletionResponse{}, fmt.Errorf("model call refused: %w", err)
		}
		var once sync.Once
		done := func() { once.Do(release) }
		defer done() // the call failed before its request was written
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { done() },
		})
	}
	start := time.Now()
	resp, err := l.next.Complete(ctx, req, call)
	if err != nil {
		l.slots.correct(-estimate) // no answer: the provider counted nothing we know of
		return resp, err
	}
	l.tokens.learn(req, resp, time.Since(start))
	if used := resp.PromptTokens + resp.CompletionTokens; used > 0 {
		l.slots.correct(float64(used) - estimate)
	}
	return resp, nil
}
