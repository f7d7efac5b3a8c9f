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
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// changeFanoutBatch is the most changes one transaction of the fan-out
// publishes: their recipients' deliveries are inserted with them, in one
// InsertManyTx, so a batch stays a short transaction however many lists
// got a popular domain's answer.
const changeFanoutBatch = 500

// changeFanoutArgs is the periodic fan-out of answer changes
// (ChangeFanoutWorker).
type changeFanoutArgs struct{}

// Kind is the River job kind.
func (changeFanoutArgs) Kind() string { return "answer_change_fanout" }

// InsertOpts keeps at most one fan-out waiting or running: the next
// period's would find nothing the running one does not take.
func (changeFanoutArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueMaintenance, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateScheduled, rivertype.JobStateRetryable}}}
}

// changeFanoutBackstop is how often the leader makes sure a fan-out job
// exists. The job itself runs every Settings.ChangeFanoutInterval by
// snoozing after each pass, so that it is one River job, not one every two
// seconds (43,200 a day in river_job and River UI); this insert, unique
// while that job waits or runs, only brings it back after it was given
// up or deleted.
const changeFanoutBackstop = time.Minute

// changeFanoutPeriodicJob keeps the fan-out job alive: inserted as the
// leader starts, and again within changeFanoutBackstop of being lost.
func changeFanoutPeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(changeFanoutBackstop),
		func() (river.JobArgs, *river.InsertOpts) { return changeFanoutArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}

// changeFanoutOutput counts what one pass of the fan-out did (logged).
type changeFanoutOutput struct {
	Published  int `json:"published"`
	Deliveries int `json:"deliveries"`
}

// ChangeFanoutWorker works changeFanoutArgs: it publishes the answer
// changes the triggers recorded (db.AnswerChangesPublish: their place in
// GET /domains/changes) and, in the same transaction, queues one
// answer.changed delivery (WebhookArgs with ChangeID) for each job and
// list with a callback URL that received the old answer within
// Settings.ChangeNotifyWindow. Each change is published once, so each
// recipient gets one delivery; its webhook-id is stable besides.
type ChangeFanoutWorker struct {
	river.WorkerDefaults[changeFanoutArgs]
	DB       db.Executor
	Settings Settings
	Logger   *slog.Logger
}

// Work publishes and fans out every change waiting, changeFanoutBatch at a
// time, each batch in a transaction of its own, then snoozes for
// Settings.ChangeFanoutInterval (a snooze uses no attempt) to run again.
// An error is retried on River's schedule.
func (w *ChangeFanoutWorker) Work(ctx context.Context, _ *river.Job[changeFanoutArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	var out changeFanoutOutput
	for {
		published, deliveries, err := w.fanOut(ctx, client)
		out.Published += published
		out.Deliveries += deliveries
		if err != nil {
			return fmt.Errorf("error fanning out answer changes: %w", err)
		}
		if published < changeFanoutBatch {
			break
		}
	}
	if out.Published > 0 {
		w.Logger.InfoContext(ctx, "answer changes published", "changes", out.Published, "deliveries", out.Deliveries)
	}
	return river.JobSnooze(w.Settings.ChangeFanoutInterval)
}

func (w *ChangeFanoutWorker) fanOut(ctx context.Context, client *river.Client[pgx.Tx]) (published, deliveries int, err error) {
	tx, err := db.Begin(ctx, w.DB)
	if err != nil {
		return 0, 0, err
	}
	defer db.Rollback(ctx, tx)
	ids, err := db.AnswerChangesPublish(ctx, tx, changeFanoutBatch)
	if err != nil || len(ids) == 0 {
		return 0, 0, err
	}
	var to []db.ChangeRecipient
	if w.Settings.ChangeNotifyWindow > 0 {
		if to, err = db.AnswerChangeNotify(ctx, tx, ids, w.Settings.ChangeNotifyWindow); err != nil {
			return 0, 0, err
		}
	}
	if len(to) > 0 {
		params := make([]river.InsertManyParams, len(to))
		for i, r := range to {
			a := WebhookArgs{ChangeID: r.ChangeID}
			if r.JobID != uuid.Nil {
				a.JobID = r.JobID.String()
			} else {
				a.ListID = r.ListID.String()
			}
			params[i] = river.InsertManyParams{Args: a}
		}
		if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
			return 0, 0, db.Translate(err)
		}
	}
	return len(ids), len(to), db.Commit(ctx, tx)
}

// loadChange reads an answer.changed delivery: the change, and the
// callback of the job or list that received the old answer. A *skipError
// when there is nothing to send: the change, the job or the list is gone,
// or no longer has a callback URL.
func (w *WebhookWorker) loadChange(ctx context.Context, a WebhookArgs) (callback, caller string, body []byte, err error) {
	kind := "job"
	if a.ListID != "" {
		kind = "list"
	}
	id, err := uuid.Parse(a.subject())
	if err != nil {
		return "", "", nil, skipf("malformed args: %s id %q is not a UUID", kind, a.subject())
	}
	change, err := db.AnswerChangeGet(ctx, w.DB, a.ChangeID)
	if errors.Is(err, db.ErrNotFound) {
		return "", "", nil, skipf("answer change %d does not exist", a.ChangeID)
	} else if err != nil {
		return "", "", nil, fmt.Errorf("error loading answer change %d: %w", a.ChangeID, err)
	}
	if kind == "list" {
		var l *classifier.List
		if l, err = db.ListGet(ctx, w.DB, id); err == nil {
			callback, caller = l.CallbackURL, l.Caller
		}
	} else {
		var j *classifier.Job
		if j, err = db.JobGet(ctx, w.DB, id); err == nil {
			callback, caller = j.CallbackURL, j.Caller
		}
	}
	switch {
	case errors.Is(err, db.ErrNotFound):
		return "", "", nil, skipf("%s %s does not exist", kind, id)
	case err != nil:
		return "", "", nil, fmt.Errorf("error loading %s %s: %w", kind, id, err)
	case callback == "":
		return "", "", nil, skipf("%s %s has no callback URL", kind, id)
	}
	p := wire.AnswerChangedPayload{Type: wire.EventAnswerChanged, Timestamp: change.ChangedAt.UTC(),
		Change: wire.NewAnswerChange(change)}
	if kind == "list" {
		p.ListID = id.String()
	} else {
		p.JobID = id.String()
	}
	if body, err = json.Marshal(p); err != nil {
		return "", "", nil, fmt.Errorf("error encoding the change: %w", err)
	}
	return callback, caller, body, nil
}
