package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

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
