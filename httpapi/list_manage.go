package httpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/domainclass/domainclass/admission"
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// The routes that manage a caller's lists once sent: finding them (GET
// /lists) and queueing their failed rows again (POST /lists/{id}/retry).

// listIndexLimit is the page size of GET /lists when ?limit is not given;
// listIndexMaxLimit the largest one may ask for: a status is a few hundred
// bytes, and a caller has a few lists a day.
const (
	listIndexLimit    = 20
	listIndexMaxLimit = 100
)

// listIndex handles GET /lists: the caller's lists, newest first, a page
// at a time (?limit=, ?cursor= from the last page's next_cursor), each as
// GET /lists/{id} answers it.
func (s *Server) listIndex(c *gin.Context) {
	q := c.Request.URL.Query()
	limit, err := pageLimit(firstOf(q["limit"]))
	if err != nil {
		s.writeError(c, err)
		return
	}
	after, err := decodeListCursor(firstOf(q["cursor"]))
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	ls, err := db.ListsOfCaller(ctx, s.cfg.DB.Pool, callerOf(c).Name, after, limit+1)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := wire.ListIndex{Lists: make([]wire.ListStatus, 0, min(len(ls), limit))}
	if len(ls) > limit {
		ls = ls[:limit]
		out.NextCursor = encodeListCursor(ls[limit-1])
	}
	for _, l := range ls {
		out.Lists = append(out.Lists, wire.NewListStatus(l))
	}
	c.JSON(http.StatusOK, out)
}

func pageLimit(v string) (int, error) {
	if v == "" {
		return listIndexLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > listIndexMaxLimit {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("limit must be a number from 1 to %d, not %q.", listIndexMaxLimit, v)}
	}
	return n, nil
}

// A cursor is the last list of a page, opaque to callers: its creation
// time and id, base64url.
func encodeListCursor(l *classifier.List) string {
	return base64.RawURLEncoding.EncodeToString([]byte(l.CreatedAt.UTC().Format(time.RFC3339Nano) + " " + l.ID.String()))
}

func decodeListCursor(v string) (*db.ListCursor, error) {
	if v == "" {
		return nil, nil
	}
	bad := &problem{status: http.StatusBadRequest, slug: "invalid-query",
		detail: "cursor must be a next_cursor this API gave; start without one."}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), " ")
	if !ok {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, bad
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, bad
	}
	return &db.ListCursor{CreatedAt: t, ID: u}, nil
}

// listRetry handles POST /lists/{list_id}/retry: a list that has ended
// COMPLETED with FAILED rows, or FAILED, gets those rows and the rows it
// never answered queued again, as chunks of a new pass; it is RUNNING
// again and counts toward the caller's active lists (429 at the limit).
// Anything else is left as it is and answered the same way, with requeued
// 0: a list still running (a second retry while the first runs changes
// nothing: retry once it has ended), or one with nothing failed. A
// cancelled list is 409: it is not resumed. Another caller's list is 404.
func (s *Server) listRetry(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	caller := callerOf(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)
	l, requeued, err := jobs.RetryList(ctx, tx, s.cfg.River, s.cfg.Queue, id, caller.Name,
		func() error {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
			defer cancel()
			_, err := admission.List(ctx, tx, s.admissionOf(admission.Resumed, caller, &classifier.List{Caller: caller.Name}, false))
			return err
		})
	if err != nil {
		s.writeListError(c, err)
		return
	}
	if err := db.Commit(ctx, tx); err != nil {
		s.writeError(c, err)
		return
	}
	if now, err := db.ListGetOfCaller(ctx, s.cfg.DB.Pool, id, caller.Name); err == nil {
		l = now // as GET shows it: what it waits for too
	}
	c.JSON(http.StatusOK, wire.ListRetried{Requeued: requeued, List: wire.NewListStatus(l)})
}
