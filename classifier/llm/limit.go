package llm

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/domainclass/domainclass/classifier"
)

// Limited bounds the calls of a Completer for the whole process: at most
// concurrency in flight, started no faster than perMinute.
type Limited struct {
	next  classifier.Completer
	slots *semaphore.Weighted // FIFO, so jobs are served in arrival order
	rate  *rate.Limiter
}

// Limit wraps next in the process-wide bounds.
func Limit(next classifier.Completer, concurrency, perMinute int) *Limited {
	return &Limited{
		next:  next,
		slots: semaphore.NewWeighted(int64(concurrency)),
		// Burst 1 spaces calls evenly: the rate is never exceeded, even in
		// the first second of a burst of jobs.
		rate: rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), 1),
	}
}

// Complete waits for a slot and for the rate, then calls the model.
func (l *Limited) Complete(ctx context.Context, req classifier.CompletionRequest) (classifier.CompletionResponse, error) {
	if err := l.slots.Acquire(ctx, 1); err != nil {
		return classifier.CompletionResponse{}, err
	}
	defer l.slots.Release(1)
	if err := l.rate.Wait(ctx); err != nil {
		return classifier.CompletionResponse{}, err
	}
	return l.next.Complete(ctx, req)
}
