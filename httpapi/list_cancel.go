package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// listCancel handles DELETE /lists/{list_id}: the list is cancelled (its
// rows not final are CANCELLED), its queued chunks are cancelled in River,
// and, once it answers, no model call for the list starts. Calls already in
// flight finish and their answers are kept. 200 with the list's status; a
// list that had already ended is left as it was.
func (s *Server) listCancel(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	caller := callerOf(c).Name
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)
	end, ended, err := db.ListCancel(ctx, tx, id, caller)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if ended {
		if err := s.wakeBatches(ctx, tx, id); err != nil {
			s.writeError(c, err)
			return
		}
		if err := s.cancelChunks(ctx, tx, id); err != nil {
			s.writeError(c, err)
			return
		}
		if end.CallbackURL != "" {
			if _, err := s.cfg.River.InsertTx(ctx, tx, jobs.WebhookArgs{ListID: id.String(), EndedAt: end.CompletedAt},
				&river.InsertOpts{MaxAttempts: s.cfg.Queue.WebhookMaxAttempts()}); err != nil {
				s.writeError(c, fmt.Errorf("error enqueueing the list's webhook: %w", db.Translate(err)))
				return
			}
		}
	}
	l, err := db.ListGetOfCaller(ctx, tx, id, caller)
	if err != nil {
		s.writeListError(c, err)
		return
	}
	if err := db.Commit(ctx, tx); err != nil {
		s.writeError(c, err)
		return
	}
	if ended {
		s.cfg.ListCounts.OnRows(classifier.StatusCancelled, l.Unfinished())
		s.cfg.ListCounts.OnEnded(classifier.StatusCancelled)
	}
	c.JSON(http.StatusOK, wire.NewListStatus(l))
}

// cancelChunks cancels the list's chunk jobs that wait in River (a few:
// chunks are fed as others finish). Running chunks are left to finish the
// calls they have in flight; the list's gate refuses their next ones.
func (s *Server) cancelChunks(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	return s.eachListJob(ctx, tx, id, jobs.ClassifyListArgs{}.Kind(), "cancelling chunk job",
		func(jobID int64) error { _, err := s.cfg.River.JobCancelTx(ctx, tx, jobID); return err },
		rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStatePending)
}

// wakeBatches makes the list's batch jobs run now: each sees the list
// cancelled and cancels its provider batch, instead of at its next poll.
func (s *Server) wakeBatches(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	return s.eachListJob(ctx, tx, id, jobs.BatchArgs{}.Kind(), "waking batch job",
		func(jobID int64) error { _, err := s.cfg.River.JobRetryTx(ctx, tx, jobID); return err },
		rivertype.JobStateScheduled, rivertype.JobStateRetryable)
}

// eachListJob calls do with each River job of kind, in one of states, whose
// args name list id. A job that is gone by then is skipped.
func (s *Server) eachListJob(ctx context.Context, tx pgx.Tx, id uuid.UUID, kind, doing string, do func(int64) error,
	states ...rivertype.JobState) error {
	res, err := s.cfg.River.JobListTx(ctx, tx, river.NewJobListParams().Kinds(kind).States(states...).
		Where("args->>'list_id' = @list_id", river.NamedArgs{"list_id": id.String()}).First(10_000))
	if err != nil {
		return fmt.Errorf("error listing the list's %s jobs: %w", kind, db.Translate(err))
	}
	for _, j := range res.Jobs {
		if err := do(j.ID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("error %s %d: %w", doing, j.ID, db.Translate(err))
		}
	}
	return nil
}
