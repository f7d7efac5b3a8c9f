package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/spend"
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

// classifyOutput is recorded on the River job (River UI shows it): what the
// attempt did, counted by outcome and source.
type classifyOutput struct {
	Domains      int `json:"domains"`
	AlreadyFinal int `json:"already_final"`
	Counts
}

// ClassifyWorker works ClassifyArgs: it answers every domain of the job that
// is not final yet, storing each answer as it comes, and completes the job
// when all are final.
type ClassifyWorker struct {
	river.WorkerDefaults[ClassifyArgs]

	// DB is the pool (in tests, a transaction with DomainConcurrency 1).
	DB       db.Executor
	Pipeline *classifier.Pipeline
	Registry *classifier.Registry
	Settings Settings
	Logger   *slog.Logger
	Metrics  *Metrics   // nil: no metrics
	Price    llm.Pricer // nil: unpriced
	// Spend counts the caller's model calls against its budget (nil: no
	// budgets).
	Spend *spend.Spenders
}

// Middleware cancels jobs whose args can never work (not JSON, or no valid
// job id) before River tries to decode them, instead of retrying them for
// hours.
func (w *ClassifyWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return cancelMalformed(func(a ClassifyArgs) error {
		if _, err := uuid.Parse(a.JobID); err != nil {
			return fmt.Errorf("job_id %q is not a UUID", a.JobID)
		}
		return nil
	})
}

// cancelMalformed is the middleware of a worker whose args are T: it
// cancels a job whose args are not T's JSON, or that check refuses, at
// once.
func cancelMalformed[T any](check func(T) error) []rivertype.WorkerMiddleware {
	return []rivertype.WorkerMiddleware{river.WorkerMiddlewareFunc(
		func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
			var args T
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return river.JobCancel(fmt.Errorf("malformed args %s: %w", job.EncodedArgs, err))
			}
			if err := check(args); err != nil {
				return river.JobCancel(fmt.Errorf("malformed args: %w", err))
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

	// 1. Load the job (and mark it RUNNING).
	j, err := db.JobStart(ctx, w.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		log.WarnContext(ctx, "classify job for an unknown job id, cancelling")
		return river.JobCancel(fmt.Errorf("job %s does not exist", id))
	} else if err != nil {
		return w.retryOrFail(ctx, log, job, id, fmt.Errorf("error starting job: %w", err))
	}
	out := classifyOutput{Domains: len(j.Domains)}
	if j.Status == classifier.StatusCompleted {
		log.InfoContext(ctx, "job already completed; nothing to do")
		out.AlreadyFinal = out.Domains
		return river.RecordOutput(ctx, out)
	}
	c, err := w.Registry.Get(j.Classifier)
	if err != nil {
		return river.JobCancel(fmt.Errorf("job %s: %w", id, err))
	}

	// 2. Answer every domain not final yet, storing each as it comes.
	var pending []pendingDomain
	for _, d := range j.Domains {
		if d.Result.Final() {
			out.AlreadyFinal++
		} else {
			pending = append(pending, pendingDomain{Key: d.Position, Domain: d.Result.Domain})
		}
	}
	log.DebugContext(ctx, "classify job started", "domains", out.Domains, "pending", len(pending))
	o := w.answerer(j).answer(ctx, log, c, fmt.Sprintf("river:%d", job.ID), pending,
		func(ctx context.Context, d pendingDomain, r classifier.Result, owner string) error {
			return db.JobDomainFinish(ctx, w.DB, id, d.Key, r, owner)
		})
	out.Counts = o.Counts
	o.summary(ctx, log, "classify job run", len(pending))
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}
	if err, failed := o.unfinished(ctx, log, w.Settings); err != nil {
		if failed {
			return w.retryOrFail(ctx, log, job, id, err)
		}
		return err
	}

	// 3. End: the app job and the River job complete together, with the
	// webhook of this end, in one transaction.
	if err := w.complete(ctx, job, id); err != nil {
		return w.retryOrFail(ctx, log, job, id, fmt.Errorf("error completing job: %w", err))
	}
	w.Metrics.JobEnded(classifier.StatusCompleted)
	log.DebugContext(ctx, "classify job completed")
	return nil
}

// answerer answers job j's domains: interactive model calls, counted
// against its caller's budget.
func (w *ClassifyWorker) answerer(j *classifier.Job) answerer {
	a := answerer{pipeline: w.Pipeline, concurrency: w.Settings.DomainConcurrency, metrics: w.Metrics, want: j.Want,
		retry: newDomainRetry(w.Settings), call: classifier.CallOptions{
			Share: classifier.Share{Class: classifier.ClassInteractive}, Spender: w.Spend.For(j.Caller)}}
	if w.Price != nil {
		a.cost = func(model string, u *classifier.Usage) float64 { return w.Price.Usage(model, u, false) }
	}
	return a
}

// complete marks the app job COMPLETED, completes its River job and, when
// this is a new end with a callback URL, queues its webhook (endJob): all
// of it or nothing.
func (w *ClassifyWorker) complete(ctx context.Context, job *river.Job[ClassifyArgs], id uuid.UUID) error {
	client, tx, err := begin(ctx, w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	if _, err := endJob(ctx, tx, client, w.Settings, id, asCompleted()); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("error completing River job: %w", err)
	}
	return db.Commit(ctx, tx)
}

// retryOrFail returns err so that River retries, and on the last attempt
// first marks the app job FAILED with the error and queues its webhook, in
// one transaction (River then discards the job, and an operator can retry
// it from River UI or the CLI).
func (w *ClassifyWorker) retryOrFail(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyArgs], id uuid.UUID, err error) error {
	return onLastAttempt(ctx, job, err, func(ctx context.Context, err error) {
		if ferr := w.fail(ctx, id, fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err)); ferr != nil {
			log.ErrorContext(ctx, "error marking job failed", "error", ferr)
			return
		}
		w.Metrics.JobEnded(classifier.StatusFailed)
		log.ErrorContext(ctx, "classify job failed; attempts exhausted", "error", err)
	})
}

func (w *ClassifyWorker) fail(ctx context.Context, id uuid.UUID, reason string) error {
	client, tx, err := begin(ctx, w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	if _, err := endJob(ctx, tx, client, w.Settings, id, asFailed(reason)); err != nil {
		return err
	}
	return db.Commit(ctx, tx)
}

// begin opens a transaction on exec, with the River client of the running
// worker (from ctx), which inserts and completes jobs in it.
func begin(ctx context.Context, exec db.Executor) (*Client, pgx.Tx, error) {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return nil, nil, err
	}
	tx, err := db.Begin(ctx, exec)
	return client, tx, err
}
