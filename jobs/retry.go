package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// A chunk's failure handling, top to bottom: the one retry policy of list
// work (and of jobs, which share its first two steps). Each step hands what
// it cannot settle to the next.
//
//  1. A domain, in the run (answerer.one): a transient failure to answer
//     it (a provider 5xx, Postgres) is tried again up to DomainAttempts
//     times, DomainRetryBackoff apart, doubling (domainRetry). A throttle,
//     another's claim, a list that ended and the run stopping are not
//     retried here (retriable): the run ends and step 2 decides. An answer
//     that arrived is never asked for again: its store is tried again for
//     StoreRetryFor (storeRetrying: a job's answer on its own, a list's in
//     its set, RowStore), then kept by the process (Pipeline.Keep) for the
//     next run.
//  2. The run (outcome.unfinished): what it left goes back to River. A
//     snooze, no attempt used: the provider throttles, another holds a
//     domain, its time was up. An error, an attempt used (River's backoff):
//     a failure that outlasted its domain's tries, a timeout. A soft stop
//     gives the attempt back. The list says what it waits for
//     (noteWaiting).
//  3. The last attempt (onLastAttempt): a chunk fails its rows that are not
//     final, each with its own reason, and the list goes on (giveUp); the
//     list ends COMPLETED with those rows FAILED, and POST /lists/{id}/retry
//     queues them again. A list ends FAILED only when the service cannot go
//     on with it at all (cannotGoOn).
//  4. After the run, when no code of ours ran its end: a worker that died
//     has its chunks handed back by the live workers within seconds
//     (process_lease.go), or by River's rescuer; a list left running with
//     nothing queued (a job discarded or deleted) is found by the sweep
//     (ListSweepWorker, list_recovery.go).

// --- 1. a domain, in the run ---------------------------------------------

// domainRetry is how one run retries a domain: a transient failure to
// answer it up to attempts times, backoff apart (doubling); a failure to
// store an answer that arrived for up to storeFor.
type domainRetry struct {
	attempts int
	backoff  time.Duration
	storeFor time.Duration
}

// newDomainRetry is the reviewed retry of s.
func newDomainRetry(s Settings) domainRetry {
	return domainRetry{attempts: s.DomainAttempts, backoff: s.DomainRetryBackoff, storeFor: s.StoreRetryFor()}
}

// storeMaxWait caps the wait between two tries of a store.
const storeMaxWait = 5 * time.Second

// storeTryTimeout bounds one try of a store, which runs past the run's own
// context (a soft stop must not lose an answer that arrived).
const storeTryTimeout = 10 * time.Second

// retriable reports whether err is a transient failure to retry in the
// run: not a throttle (the run snoozes), another job's claim (it waits for
// that job), a list that ended, or the run stopping.
func (a answerer) retriable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	_, throttled := classifier.RetryAfter(err)
	return !throttled && !errors.Is(err, classifier.ErrBusy) && !errors.Is(err, db.ErrListEnded)
}

// store stores an answer that arrived (storeRetrying).
func (a answerer) store(ctx context.Context, log *slog.Logger, d pendingDomain, r classifier.Result, owner string, store storeFunc) error {
	return storeRetrying(ctx, log, a.retry.storeFor, a.retry.backoff, "the answer about "+d.Domain,
		func(ctx context.Context) error { return store(ctx, d, r, owner) })
}

// storeRetrying runs store until it succeeds, for up to storeFor, backoff
// apart (doubling, at most storeMaxWait): an answer that was paid for.
// Each try runs past ctx (a soft stop must not lose it), bounded by
// storeTryTimeout, and the tries stop once ctx is done. what names the
// answers in the error.
func storeRetrying(ctx context.Context, log *slog.Logger, storeFor, backoff time.Duration, what string, store func(context.Context) error) error {
	deadline := time.Now().Add(storeFor)
	wait := max(backoff, 10*time.Millisecond)
	for try := 1; ; try++ {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTryTimeout)
		err := store(sctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) || !func() bool {
			log.DebugContext(ctx, "error storing; trying again", "answers", what, "error", err, "try", try, "wait", wait.String())
			return sleep(ctx, jitter(wait))
		}() {
			return fmt.Errorf("error storing %s: %w", what, err)
		}
		wait = min(wait*2, storeMaxWait)
	}
}

// sleep waits d, or until ctx is done (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter is d ±20%, so that domains that failed together are not retried
// in one burst.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d*4/5 + rand.N(d*2/5+1)
}

// --- 2. the run ------------------------------------------------------------

// unfinished returns what the attempt returns to River instead of ending
// the job, or nil when every domain is final. failed marks an error that
// uses up an attempt (on the last one the job is given up); a soft stop
// and the snoozes use none.
func (o outcome) unfinished(ctx context.Context, log *slog.Logger, s Settings) (err error, failed bool) {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The client is stopping (soft stop): River puts the job back with
		// its attempt restored; finished domains stay finished.
		return ctx.Err(), false
	case ctx.Err() != nil:
		return fmt.Errorf("job timed out: %w", ctx.Err()), true
	case o.err != nil:
		if n := len(o.failures); n > 1 {
			return fmt.Errorf("%w (and %d more domains, each after %d tries)", o.err, n-1, s.DomainAttempts), true
		}
		return o.err, true
	case o.throttled:
		snooze := min(max(o.retryAfter, time.Second), s.MaxSnooze)
		log.InfoContext(ctx, "snoozing job while the provider throttles", "snooze", snooze.String())
		return river.JobSnooze(snooze), false
	case o.busy:
		// Back when a domain another call holds is likely answered, or when
		// the provider batch holding one may be taken over: no worker waits.
		return river.JobSnooze(min(max(s.BusySnooze, o.busyFor), s.MaxSnooze)), false
	case o.deferred:
		// Its time is up: back to the end of the queue, no attempt used.
		return river.JobSnooze(0), false
	}
	return nil, false
}

// waiting says, for a caller reading its list's status, what an
// unfinished run waits for, and the failure to record as its last error
// ("" for none); both "" when it waits for nothing worth saying (its time
// was up, the process is stopping).
func (o outcome) waiting() (waiting, lastError string) {
	switch {
	case o.err != nil:
		lastError = troubleOf(o.err)
		return "its work failed and is being retried with backoff: " + lastError, lastError
	case o.throttled:
		return "the model provider asked to slow down; its work waits and goes on", ""
	case o.busy:
		return "some of its domains are being answered by other work (another job's call, or another list's provider batch); it takes them over or uses their answers", ""
	}
	return "", ""
}

// troubleOf words a run's transient failure for a caller: what failed,
// never an address, a body or a secret (the worker's log has the error).
func troubleOf(err error) string {
	if t := llm.Trouble(err); t != "" {
		return t
	}
	switch {
	case errors.Is(err, db.ErrUnavailable):
		return "the database was unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "a step timed out"
	}
	return "an internal error (the worker's log has it)"
}

// noteWaiting records on the list what its chunk's run was held up by (a
// provider outage, a throttle, other jobs' claims), so that its status
// says why its counts stand still. A failure to write it is logged: the
// run's outcome stands.
func (w *ClassifyListWorker) noteWaiting(ctx context.Context, log *slog.Logger, id uuid.UUID, o outcome) {
	waiting, lastError := o.waiting()
	if waiting == "" {
		return
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTryTimeout)
	defer cancel()
	if err := db.ListNote(nctx, w.DB, []uuid.UUID{id}, waiting, lastError); err != nil {
		log.WarnContext(ctx, "error noting what the list waits for", "error", err)
	}
}

// --- 3. the last attempt ---------------------------------------------------

// giveUpTimeout bounds the writes that give a job's work up on its last
// attempt (a job FAILED, a chunk's or a batch's rows FAILED, the list ended,
// a webhook queued). They run on a context of their own, since the run's is
// often done (a run that timed out is the usual last attempt). They are a
// few short transactions, the largest failing a batch's BatchMaxRequests
// rows one statement each: milliseconds on a healthy database, seconds on a
// busy one. 30 s lets them through a slow database and still bounds a run
// whose database is gone; what it leaves undone the list sweep (lists) or an
// operator's retry (jobs) picks up.
const giveUpTimeout = 30 * time.Second

// onLastAttempt returns err, the run's outcome, for River to retry; on the
// job's last attempt it first calls giveUp with err, on a context that
// outlives the run's by at most giveUpTimeout, so that the work ends with
// its reason instead of being discarded half-done. Success, a snooze and a
// cancel are outcomes, not failures: they are returned as they are.
func onLastAttempt[T river.JobArgs](ctx context.Context, job *river.Job[T], err error,
	giveUp func(ctx context.Context, err error)) error {
	var (
		snooze *rivertype.JobSnoozeError
		cancel *rivertype.JobCancelError
	)
	if err == nil || errors.As(err, &snooze) || errors.As(err, &cancel) || job.Attempt < job.MaxAttempts {
		return err
	}
	gctx, done := context.WithTimeout(context.WithoutCancel(ctx), giveUpTimeout)
	defer done()
	giveUp(gctx, err)
	return err
}

// retryOrGiveUp returns err so that River retries the chunk, and on its
// last attempt first gives the chunk up (giveUp). failures are the
// domains' own errors, by row.
func (w *ClassifyListWorker) retryOrGiveUp(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID,
	err error, failures map[int]error) error {
	return onLastAttempt(ctx, job, err, func(ctx context.Context, err error) {
		if gerr := w.giveUp(ctx, log, job, id, err, failures); gerr != nil {
			log.ErrorContext(ctx, "error giving the chunk up; the list sweep will", "error", gerr, "chunk_error", err)
		}
	})
}

// giveUp fails the chunk's rows that are not final: each domain that
// failed with its own error, the rest (never answered in the last run) with
// the chunk's; then it queues the chunk after the window and ends the list
// if every row is final: one transaction. River then discards the job.
func (w *ClassifyListWorker) giveUp(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID,
	err error, failures map[int]error) error {
	client, tx, berr := w.begin(ctx)
	if berr != nil {
		return berr
	}
	defer db.Rollback(ctx, tx)
	l, lerr := db.ListGet(ctx, tx, id)
	if errors.Is(lerr, db.ErrNotFound) {
		return nil
	} else if lerr != nil {
		return lerr
	}
	if l.Ended() {
		return nil
	}
	from, to := l.ChunkRange(job.Args.Chunk)
	var (
		rows    []int
		reasons []string
	)
	for _, row := range slices.Sorted(maps.Keys(failures)) {
		if row >= from && row <= to {
			rows = append(rows, row)
			reasons = append(reasons, fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, failures[row]))
		}
	}
	own, ferr := db.ListRowsFailEach(ctx, tx, id, rows, reasons)
	if ferr != nil {
		return ferr
	}
	rest, ferr := db.ListRowsFail(ctx, tx, id, from, to,
		fmt.Sprintf("not answered: chunk %d gave up after %d attempts: %v", job.Args.Chunk, job.Attempt, err))
	if ferr != nil {
		return ferr
	}
	// The chunk's job still runs (River discards it once this returns):
	// it counts itself in the window.
	feedSafely(ctx, log, client, tx, id, job.Args.Chunk+w.Settings.ListChunksInFlight, w.Settings.ListChunksInFlight+1)
	ended, cerr := endList(ctx, tx, client, w.Settings, id, asCompleted())
	if cerr != nil {
		return cerr
	}
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	w.Lists.ListRows(classifier.StatusFailed, own+rest)
	log.WarnContext(ctx, "chunk gave up; its rows not answered are FAILED, the list goes on",
		"rows_failed", own+rest, "error", err)
	if ended {
		w.Lists.ListEnded(classifier.StatusCompleted)
		log.InfoContext(ctx, "list completed")
	}
	return nil
}

// cannotGoOn ends list l FAILED with reason, the one way a list ends
// FAILED: the service cannot go on with it at all (its classifier is gone
// from the deployment). Its rows not final read FAILED with the reason; a
// retry queues them again once the cause is fixed. The chunk is cancelled.
func (w *ClassifyListWorker) cannotGoOn(ctx context.Context, log *slog.Logger, l *classifier.List, reason string) error {
	client, tx, err := w.begin(ctx)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	ended, err := endList(ctx, tx, client, w.Settings, l.ID, asFailed(reason))
	if err != nil {
		return err
	}
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	if ended {
		w.Lists.ListEnded(classifier.StatusFailed)
		log.ErrorContext(ctx, "list failed: the service cannot go on with it", "reason", reason)
	}
	return river.JobCancel(fmt.Errorf("list %s: %s", l.ID, reason))
}
