package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// listCancel handles DELETE /lists/{list_id}: the list is cancelled
// (jobs.CancelList: its rows not final are CANCELLED, its queued chunks are
// cancelled in River), and, once it answers, no model call for the list
// starts. Calls already in flight finish and their answers are kept. 200
// with the list's status; a list that had already ended is left as it was.
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
	ended, err := jobs.CancelList(ctx, tx, s.cfg.River, s.cfg.Queue, id, caller)
	if err != nil {
		s.writeError(c, err)
		return
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
