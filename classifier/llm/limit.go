package llm

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// DefaultMaxConcurrency is LLM_MAX_CONCURRENCY when it is not set, and
// only while no limit of the provider account is known: none configured
// (LLM_ACCOUNT_*), none stated by the provider (x-ratelimit headers). A
// process then holds at most 8 calls in flight: what a small-tier account
// takes without queueing hundreds of requests on its side, and a bound on
// what a model server that states nothing is sent (by Little's law, 8
// calls of 1 s are 8 a second). Once a limit is known the deployment's
// capacity decides (lease.go) and a process's own caps are off unless set:
// a default rate (it was 300 a minute) held a worker of 32 slots to 5 calls
// a second (issue 36).
const DefaultMaxConcurrency = 8

// noSlotLimit is a scheduler's slots when nothing bounds the calls in
// flight but the rate: a limit of the account is known and it is not one of
// calls in flight, and the process sets no cap of its own.
const noSlotLimit = math.MaxInt32

// Limited bounds the calls of a Completer for the whole process: at most
// concurrency in flight, started no faster than perMinute, and shared
// between interactive jobs and lists as the scheduler says (share.go).
// Governed by a Capacity, the deployment's capacity decides (lease.go), and
// those two are this process's own caps, each off when 0.
type Limited struct {
	next   classifier.Completer
	slots  *scheduler
	tokens *tokenEstimator
	// The process's own caps (LLM_MAX_CONCURRENCY, LLM_RATE_PER_MINUTE);
	// 0 is not set.
	concurrency int
	perMinute   int
}

// Limit wraps next in the process-wide bounds; obs, if not nil, is told
// how the slots are used. A perMinute of 0 is no rate; a concurrency of 0
// is DefaultMaxConcurrency until a Capacity that governs it knows a limit
// of the account (without one, nothing is known: eval, tests).
func Limit(next classifier.Completer, concurrency, perMinute int, obs SlotObserver) *Limited {
	var requests *bucket
	if perMinute > 0 {
		// A bucket of one spaces calls evenly: the rate is never exceeded,
		// even in the first second of a burst of jobs.
		requests = newBucket(float64(perMinute)/60, 1, time.Now())
	}
	return &Limited{next: next, slots: newScheduler(cmp.Or(concurrency, DefaultMaxConcurrency), requests, obs),
		tokens: newTokenEstimator(), concurrency: concurrency, perMinute: perMinute}
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
