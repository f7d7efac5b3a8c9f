package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// Batcher is the provider's Batch API (*llm.Client).
type Batcher interface {
	BatchLine(customID string, req classifier.CompletionRequest) ([]byte, error)
	BatchSubmit(ctx context.Context, input io.Reader, key string) (llm.BatchStatus, error)
	BatchFind(ctx context.Context, key string) (llm.BatchStatus, bool, error)
	BatchGet(ctx context.Context, id string) (llm.BatchStatus, error)
	BatchCancel(ctx context.Context, id string) (llm.BatchStatus, error)
	BatchResults(ctx context.Context, b llm.BatchStatus, fn func(llm.BatchResult) error) error
}

// batchArgs follows one provider batch of an economy list's chunk. Like
// the others it is a claim check: the batch and its requests live in
// Postgres (llm_batch, llm_batch_item).
type batchArgs struct {
	BatchID string `json:"batch_id"`
	ListID  string `json:"list_id"`
}

// Kind is the River job kind.
func (batchArgs) Kind() string { return "llm_batch" }

// InsertOpts puts batch jobs on the list queue, one per batch.
func (batchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueList, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// batchOutput is recorded on the batch's River job (River UI shows it).
type batchOutput struct {
	ListID          string `json:"list_id"`
	ProviderBatchID string `json:"provider_batch_id,omitempty"`
	ProviderStatus  string `json:"provider_status,omitempty"`
	Answered        int    `json:"answered,omitempty"`
	Fallbacks       int    `json:"fallbacks,omitempty"`
	Failed          int    `json:"failed,omitempty"`
}

// BatchWorker works batchArgs. Each run is short: it submits the batch,
// or looks at it and snoozes while the provider runs it (no worker slot
// and no model slot held in between), or, once the provider is done,
// stores every answer through the same parser and storage as a call.
// Requests the batch did not answer (expired, failed, unreadable) go to the
// model once more as calls; a batch failed as a whole is submitted again
// up to BatchMaxAttempts times, then its rows are FAILED with the
// provider's reason.
type BatchWorker struct {
	river.WorkerDefaults[batchArgs]

	DB       db.Executor
	Batcher  Batcher
	Pipeline *classifier.Pipeline
	Registry *classifier.Registry
	Settings Settings
	Price    llm.Pricer // nil: unpriced
	Logger   *slog.Logger
	Metrics  *Metrics
	Lists    *ListMetrics
	// MaxFileBytes is the provider's limit on an input file; 0 is
	// maxBatchFileBytes.
	MaxFileBytes int
}

// Middleware cancels batch jobs whose args can never work.
func (w *BatchWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return cancelMalformed(func(a batchArgs) error {
		if _, err := uuid.Parse(a.BatchID); err != nil {
			return fmt.Errorf("batch_id %q", a.BatchID)
		}
		return nil
	})
}

// Timeout: storing 50,000 answers, and the fallbacks' calls.
func (w *BatchWorker) Timeout(*river.Job[batchArgs]) time.Duration { return w.Settings.JobTimeout }

// Work moves the batch one step. On the last attempt an error gives the
// batch's rows up (FAILED), so that the list still ends.
func (w *BatchWorker) Work(ctx context.Context, job *river.Job[batchArgs]) error {
	id := uuid.MustParse(job.Args.BatchID) // checked by Middleware
	return onLastAttempt(ctx, job, w.step(ctx, id), func(ctx context.Context, err error) {
		if gerr := w.giveUp(ctx, id, fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err)); gerr != nil {
			w.Logger.ErrorContext(ctx, "error giving a batch up", "batch", job.Args.BatchID, "error", gerr)
		}
	})
}

// step moves batch id from the state it is in:
//
//	staging   → nothing (no chunk has handed it over yet)
//	ready     → submitted (submit), or ended: its requests asked as calls
//	            (a file over the provider's limit) or FAILED (refused)
//	submitted → submitted (poll: the provider runs it; a snooze), ready again
//	            (failed whole, attempts left), or ended (its answers stored)
//	ended     → nothing
//
// Whatever the state, a batch whose list has ended is abandoned, and one
// with no model to ask has its rows FAILED.
func (w *BatchWorker) step(ctx context.Context, id uuid.UUID) error {
	b, err := db.BatchGet(ctx, w.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("batch %s does not exist", id))
	} else if err != nil {
		return err
	}
	if b.Status == db.BatchStaging || b.Status == db.BatchEnded {
		return nil
	}
	r, err := w.newRun(ctx, b)
	if err != nil {
		return err
	}
	defer r.settleSpend(ctx)
	if r.l.Ended() {
		return r.abandon(ctx, "the list is "+string(r.l.Status))
	}
	if r.c, err = w.Registry.Get(r.l.Classifier); err != nil {
		return river.JobCancel(err)
	}
	if w.Batcher == nil {
		return r.failAll(ctx, classifier.ErrNoLLM, classifier.ErrNoLLM)
	}
	switch b.Status {
	case db.BatchReady:
		return r.submit(ctx)
	case db.BatchSubmitted:
		return r.poll(ctx)
	}
	return river.JobCancel(fmt.Errorf("batch %s is in an unknown state %q", id, b.Status))
}

// giveUp fails the rows of batch id not final yet with reason, and ends it.
func (w *BatchWorker) giveUp(ctx context.Context, id uuid.UUID, reason string) error {
	b, err := db.BatchGet(ctx, w.DB, id)
	if err != nil {
		return err
	}
	r, err := w.newRun(ctx, b)
	if err != nil {
		return err
	}
	defer r.settleSpend(ctx)
	return r.failAll(ctx, reason, reason)
}

// providerErr snoozes a throttled batch API call and returns any other
// error as it is: River retries the run, and on its last attempt Work fails
// the batch's rows (a refused submission is handled in submit, at once).
func (w *BatchWorker) providerErr(err error) error {
	if ra, ok := classifier.RetryAfter(err); ok {
		return river.JobSnooze(min(max(ra, time.Second), w.Settings.MaxSnooze))
	}
	return err
}
