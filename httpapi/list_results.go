package httpapi

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// listGet handles GET /lists/{list_id}: the list's status and progress,
// from its counters. Another caller's list is 404.
func (s *Server) listGet(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	l, err := db.ListGetOfCaller(ctx, s.cfg.DB.Pool, id, callerOf(c).Name)
	if err != nil {
		s.writeListError(c, err)
		return
	}
	c.JSON(http.StatusOK, wire.NewListStatus(l))
}

func (s *Server) listID(c *gin.Context) (uuid.UUID, bool) {
	id, err := uuid.Parse(c.Param("list_id"))
	if err != nil {
		writeProblem(c, http.StatusBadRequest, "invalid-list-id", "The list id must be a UUID.", nil)
		return uuid.Nil, false
	}
	return id, true
}

func (s *Server) writeListError(c *gin.Context, err error) {
	if errors.Is(err, db.ErrNotFound) {
		writeProblem(c, http.StatusNotFound, "not-found", "No list with this id.", nil)
		return
	}
	s.writeError(c, err)
}

// listResults handles GET /lists/{list_id}/results: every row in upload
// order, final or not, as CSV (the default) or NDJSON, streamed from a
// cursor so that memory stays flat; ?status= filters, ?after= resumes.
// CSV cells that a spreadsheet would run as formulas are escaped
// (csvcell), unless ?escape_formulas=false.
func (s *Server) listResults(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	q := c.Request.URL.Query()
	after, err := intParam(q, "after", maxRowParam)
	if err != nil {
		s.writeError(c, err)
		return
	}
	statuses, err := statusParam(q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	escape, err := boolParam(q, "escape_formulas")
	if err != nil {
		s.writeError(c, err)
		return
	}
	escape = escape || firstOf(q["escape_formulas"]) == "" // on unless turned off
	format, ok := negotiateResults(c.GetHeader("Accept"))
	if !ok {
		writeProblem(c, http.StatusNotAcceptable, "not-acceptable",
			"Results come as text/csv or application/x-ndjson; send one of them in Accept.", nil)
		return
	}
	extendDeadlines(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	conn, err := s.pool().Acquire(ctx) // the download's one connection, had as quickly as any request's
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer conn.Release()
	l, err := db.ListGetOfCaller(ctx, conn, id, callerOf(c).Name)
	if err != nil {
		s.writeListError(c, err)
		return
	}

	c.Header("Content-Type", string(format)+"; charset=utf-8")
	c.Status(http.StatusOK)
	out := bufio.NewWriterSize(c.Writer, 64<<10)
	var write func(*classifier.ListRow) error
	answerField := s.cfg.Registry.AnswerField(l.Classifier)
	if format == formatCSV {
		cw := csv.NewWriter(out)
		_ = cw.Write(wire.ListRowColumns(answerField))
		var fields []string
		write = func(r *classifier.ListRow) error {
			row := wire.NewListRow(r, answerField)
			fields = row.CSV(fields[:0])
			if escape {
				csvcell.EscapeAll(fields)
			}
			return cw.Write(fields)
		}
		defer cw.Flush()
	} else {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		write = func(r *classifier.ListRow) error { return enc.Encode(wire.NewListRow(r, answerField)) }
	}
	err = db.ListResults(ctx, conn, db.ListResultsParams{ListID: id, After: after, Statuses: statuses,
		ListStatus: l.Status, ListError: l.Error, URLsOnly: format == formatCSV}, write)
	if err != nil {
		// The header is out: end the response without its last chunk, so
		// the client sees a broken download, never a short one that looks
		// whole.
		s.cfg.Logger.WarnContext(ctx, "list results stopped", "list_id", id.String(), "error", err)
		panic(http.ErrAbortHandler)
	}
	if format == formatCSV {
		return // the deferred Flush writes what is left, then the buffer
	}
	_ = out.Flush()
}

// extendDeadlines lets a list request read and write for listTimeout.
func extendDeadlines(c *gin.Context) {
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Now().Add(listTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(listTimeout))
}

// negotiateResults picks CSV or NDJSON from Accept, with its q-values
// (RFC 9110, 12.5.1): each format takes the quality of the most specific
// range that names it (text/csv, then text/*, then */*; NDJSON is
// application/x-ndjson or application/jsonl, then application/*), none
// being 0, and 0 is "not acceptable". The higher quality wins, CSV on a
// tie; no Accept is CSV; false when neither is acceptable (406).
func negotiateResults(accept string) (listFormat, bool) {
	if strings.TrimSpace(accept) == "" {
		return formatCSV, true
	}
	csvQ := acceptQuality(accept, "text", "csv")
	ndjsonQ := acceptQuality(accept, "application", "x-ndjson", "jsonl")
	switch {
	case csvQ > 0 && csvQ >= ndjsonQ:
		return formatCSV, true
	case ndjsonQ > 0:
		return formatNDJSON, true
	}
	return "", false
}
