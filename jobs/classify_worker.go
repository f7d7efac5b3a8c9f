package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// ClassifyArgs is the River job of one app job. It is a claim check: the
// domains live in Postgres, the args hold only the job id.
type ClassifyArgs struct {
	JobID string `json:"job_id"`
}

// Kind is the River job kind.
func (ClassifyArgs) Kind() string { return "classify" }

// InsertOpts puts the job on its queue and makes it unique by args, so one
// app job never has two live River jobs.
func (ClassifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueClassify, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Inserter inserts River jobs inside a transaction (a River client).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// EnqueueClassify returns the db.EnqueueFunc that inserts a job's River job
// inside the transaction that writes the job.
func EnqueueClassify(ins Inserter) db.EnqueueFunc {
	return func(ctx context.Context, tx pgx.Tx, jobID uuid.UUID) (int64, error) {
		res, err := ins.InsertTx(ctx, tx, ClassifyArgs{JobID: jobID.String()}, nil)
		if err != nil {
			return 0, fmt.Errorf("error enqueueing classify job: %w", err)
		}
		return res.Job.ID, nil
	}
}

// ClassifyStore is what the worker needs from storage.
type ClassifyStore interface {
	JobStart(ctx context.Context, id uuid.UUID) (*classifier.Job, error)
	JobDomainFinish(ctx context.Context, jobID uuid.UUID, position int, r classifier.Result, owner string) error
	JobComplete(ctx context.Context, id uuid.UUID, then db.JobEndFunc) error
	JobFail(ctx context.Context, id uuid.UUID, reason string, then db.JobEndFunc) error
}

// ClassifyOutput is recorded on the River job (River UI shows it): what the
// attempt did, counted by outcome and source.
type ClassifyOutput struct {
	Domains      int `json:"domains"`
	AlreadyFinal int `json:"already_final"`
	Known        int `json:"known"`
	Cache        int `json:"cache"`
	LLM          int `json:"llm"`
	Failed       int `json:"failed"`
	Pending      int `json:"pending"`
}

// ClassifyWorker works ClassifyArgs: it answers every domain of the job that
// is not final yet, storing each answer as it comes, and completes the job
// when all are final.
type ClassifyWorker struct {
	river.WorkerDefaults[ClassifyArgs]

	Store    ClassifyStore
	Pipeline *classifier.Pipeline
	Registry *classifier.Registry
	Settings Settings
	Logger   *slog.Logger
	Metrics  *Metrics // nil: no metrics
	// OnJobEnd, when set, runs in the transaction that ends the app job
	// (COMPLETED or FAILED), for follow-up jobs such as webhooks.
	OnJobEnd func(ctx context.Context, tx pgx.Tx, jobID uuid.UUID) error
}

// Middleware cancels jobs whose args can never work (not JSON, or no valid
// job id) before River tries to decode them, instead of retrying them for
// hours.
func (w *ClassifyWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return []rivertype.WorkerMiddleware{river.WorkerMiddlewareFunc(
		func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
			var args ClassifyArgs
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return river.JobCancel(fmt.Errorf("malformed args %s: %w", job.EncodedArgs, err))
			}
			if _, err := uuid.Parse(args.JobID); err != nil {
				return river.JobCancel(fmt.Errorf("malformed args: job_id %q is not a UUID", args.JobID))
			}
			return doInner(ctx)
		})}
}

// Timeout is the reviewed job timeout.
func (w *ClassifyWorker) Timeout(*river.Job[ClassifyArgs]) time.Duration {
	return w.Settings.JobTimeout
}

// Work answers the job's pending domains. Outcomes: nil when every domain is
// final (the job is completed in the same transaction as the app job); a
// snooze when the provider throttles or another job is asking about a shared
// domain (no attempt used); an error for transient failures (River retries;
// on the last attempt the app job is marked FAILED first); a cancel for a
// job that does not exist.
func (w *ClassifyWorker) Work(ctx context.Context, job *river.Job[ClassifyArgs]) error {
	id := uuid.MustParse(job.Args.JobID) // checked by Middleware
	log := w.Logger.With("job_id", id.String(), "river_job_id", job.ID, "attempt", job.Attempt)

	j, err := w.Store.JobStart(ctx, id)
	if classifier.ErrorCode(err) == classifier.ENOTFOUND {
		log.WarnContext(ctx, "classify job for an unknown job id, cancelling")
		return river.JobCancel(fmt.Errorf("job %s does not exist", id))
	} else if err != nil {
		return w.retryOrFail(ctx, log, job, id, fmt.Errorf("error starting job: %w", err))
	}
	out := ClassifyOutput{Domains: len(j.Domains)}
	if j.Status == classifier.StatusCompleted {
		log.InfoContext(ctx, "job already completed; nothing to do")
		out.AlreadyFinal = out.Domains
		return river.RecordOutput(ctx, out)
	}
	c, err := w.Registry.Get(j.Classifier)
	if err != nil {
		return river.JobCancel(fmt.Errorf("job %s: %w", id, err))
	}

	var pending []classifier.JobDomain
	for _, d := range j.Domains {
		if d.Result.Final() {
			out.AlreadyFinal++
		} else {
			pending = append(pending, d)
		}
	}
	log.InfoContext(ctx, "classify job started", "domains", out.Domains, "pending", len(pending))

	owner := fmt.Sprintf("river:%d", job.ID)
	var (
		mu         sync.Mutex
		firstErr   error
		retryAfter time.Duration
		throttled  bool
		busy       bool
		wg         sync.WaitGroup
		slots      = make(chan struct{}, w.Settings.DomainConcurrency)
	)
	for _, d := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				return
			}
			dlog := log.With("domain", d.Result.Domain)
			r, err := w.Pipeline.Classify(ctx, c, d.Result.Domain, owner)
			if err == nil {
				err = w.Store.JobDomainFinish(ctx, id, d.Position, r, owner)
			}

			mu.Lock()
			defer mu.Unlock()
			if ra, ok := classifier.RetryAfter(err); ok {
				throttled = true
				retryAfter = max(retryAfter, ra)
				dlog.WarnContext(ctx, "provider throttled; domain will be retried", "retry_after", ra.String())
				return
			}
			switch {
			case errors.Is(err, classifier.ErrBusy):
				busy = true
				dlog.InfoContext(ctx, "domain is being classified by another job; will look again")
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
				dlog.WarnContext(ctx, "error classifying domain; will retry", "error", err)
			case r.Status == classifier.StatusFailed:
				w.Metrics.DomainResult(r)
				out.Failed++
				dlog.InfoContext(ctx, "domain failed", "reason", r.Error, "source", string(r.Source))
			default:
				w.Metrics.DomainResult(r)
				switch r.Source {
				case classifier.SourceKnown:
					out.Known++
				case classifier.SourceCache:
					out.Cache++
				case classifier.SourceLLM:
					out.LLM++
				}
				dlog.InfoContext(ctx, "domain classified", "source", string(r.Source), "answer", r.Answer, "confidence", r.Confidence)
			}
		}()
	}
	wg.Wait()
	out.Pending = len(pending) - out.Known - out.Cache - out.LLM - out.Failed
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}

	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The client is stopping (soft stop): River puts the job back with
		// its attempt restored; finished domains stay finished.
		return ctx.Err()
	case ctx.Err() != nil:
		return w.retryOrFail(ctx, log, job, id, fmt.Errorf("job timed out: %w", ctx.Err()))
	case firstErr != nil:
		return w.retryOrFail(ctx, log, job, id, firstErr)
	case throttled:
		snooze := min(max(retryAfter, time.Second), w.Settings.MaxSnooze)
		log.InfoContext(ctx, "snoozing job while the provider throttles", "snooze", snooze.String())
		return river.JobSnooze(snooze)
	case busy:
		return river.JobSnooze(w.Settings.BusySnooze)
	}

	err = w.Store.JobComplete(ctx, id, func(ctx context.Context, tx pgx.Tx, ended bool) error {
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
			return fmt.Errorf("error completing River job: %w", err)
		}
		if ended && w.OnJobEnd != nil {
			return w.OnJobEnd(ctx, tx, id)
		}
		return nil
	})
	if err != nil {
		return w.retryOrFail(ctx, log, job, id, fmt.Errorf("error completing job: %w", err))
	}
	w.Metrics.JobEnded(classifier.StatusCompleted)
	log.InfoContext(ctx, "classify job completed", "known", out.Known, "cache", out.Cache, "llm", out.LLM, "failed", out.Failed)
	return nil
}

// retryOrFail returns err so that River retries, and on the last attempt
// first marks the app job FAILED with the error (River then discards the
// job, and an operator can retry it from River UI or the CLI).
func (w *ClassifyWorker) retryOrFail(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyArgs], id uuid.UUID, err error) error {
	if job.Attempt < job.MaxAttempts {
		return err
	}
	reason := fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ferr := w.Store.JobFail(fctx, id, reason, func(ctx context.Context, tx pgx.Tx, ended bool) error {
		if ended && w.OnJobEnd != nil {
			return w.OnJobEnd(ctx, tx, id)
		}
		return nil
	})
	if ferr != nil {
		log.ErrorContext(ctx, "error marking job failed", "error", ferr)
	} else {
		w.Metrics.JobEnded(classifier.StatusFailed)
		log.ErrorContext(ctx, "classify job failed; attempts exhausted", "error", err)
	}
	return err
}
