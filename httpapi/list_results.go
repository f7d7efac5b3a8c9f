package httpapi

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

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
// order, final or not, as CSV (the default) or NDJSON; ?status= filters,
// ?after= resumes. CSV cells that a spreadsheet would run as formulas are
// escaped (csvcell), unless ?escape_formulas=false.
//
// The rows are read a page at a time (resultsPage): each page's query
// takes a connection and gives it back, then the page is written, at no
// less than the minimum rate (rateWriter). So a client that reads slowly
// holds a socket and one page of encoded rows, never a connection, and one
// that reads too slowly is cut off. Downloads in progress are bounded per
// caller and per process (429).
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
	leave, _, err := s.downloads.enter(callerOf(c).Name, false)
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer leave()
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	l, err := db.ListGetOfCaller(lctx, s.cfg.DB.Pool, id, callerOf(c).Name)
	lcancel()
	if err != nil {
		s.writeListError(c, err)
		return
	}

	// The list's status is read once: every page shows the rows not final
	// as of it (CANCELLED, FAILED), so that the rows agree with one another.
	d := newResultsPages(format, s.cfg.Registry.AnswerField(l.Classifier), escape, db.ListResultsParams{ListID: id,
		After: after, Statuses: statuses, ListStatus: l.Status, ListError: l.Error, URLsOnly: format == formatCSV}, l.Rows)
	// The first page is read before the header goes out, so that a database
	// that cannot be had is a 503 still.
	if err := s.resultsPage(ctx, d); err != nil {
		s.writeError(c, err)
		return
	}
	c.Header("Content-Type", string(format)+"; charset=utf-8")
	c.Status(http.StatusOK)
	w := newRateWriter(c.Writer, http.NewResponseController(c.Writer), s.cfg.Lists.DownloadMinRate, s.cfg.Lists.DownloadRateWindow)
	for {
		if err := w.page(d.buf.Bytes()); err != nil {
			s.stopResults(ctx, id, w, err)
		}
		d.buf.Reset()
		if d.done() {
			break
		}
		if err := s.resultsPage(ctx, d); err != nil {
			s.stopResults(ctx, id, w, err)
		}
	}
	// A purge takes the list off before its rows: the list still there
	// after the last page means that every page had its rows.
	lctx, lcancel = context.WithTimeout(ctx, s.cfg.DBTimeout)
	there, err := db.ListExists(lctx, s.cfg.DB.Pool, id)
	lcancel()
	if err == nil && !there {
		err = errors.New("the list was purged during the download")
	}
	if err != nil {
		s.stopResults(ctx, id, w, err)
	}
	w.finish()
}

// stopResults ends a download whose header is out without its last chunk,
// so that the client sees a broken download, never a short one that looks
// whole; it resumes with ?after=.
func (s *Server) stopResults(ctx context.Context, id uuid.UUID, w *rateWriter, err error) {
	switch {
	case w.tooSlow(err):
		s.cfg.Logger.InfoContext(ctx, "list results cut off: the client reads too slowly", "list_id", id.String(),
			"bytes", w.total, "min_rate", w.minRate, "window", w.window.String())
	case w.failed, errors.Is(err, context.Canceled): // a write failed, or the client hung up meanwhile
		s.cfg.Logger.InfoContext(ctx, "list results stopped: the client went away", "list_id", id.String(), "error", err)
	default:
		s.cfg.Logger.WarnContext(ctx, "list results stopped", "list_id", id.String(), "error", err)
	}
	panic(http.ErrAbortHandler)
}

// The pages of a download. A page is a range of row numbers (the primary
// key), so that a selective ?status= reads no more than the range, and it
// ends early once its encoded rows fill resultsPageBytes. Its query takes
// a few milliseconds; the rows per page make that round trip a small part
// of a page's time (the results bar: a million CSV rows at ≥ 200k rows/s).
const (
	// resultsPageRows: CSV rows are 50–400 bytes (an answered row keeps
	// its evidence addresses), so a page is 0.25–2 MB.
	resultsPageRows = 5_000
	// resultsPageRowsNDJSON: an NDJSON row carries its evidence (about
	// 1.7 kB with five pages of it).
	resultsPageRowsNDJSON = 1_000
	// resultsPageBytes bounds a page's encoded rows, the memory a download
	// holds (its buffer has resultsRowSlack more, for the row that crosses
	// it); a page that fills it halves the rows of the next ones (down to
	// resultsMinPageRows).
	resultsPageBytes   = 2 << 20
	resultsRowSlack    = 64 << 10
	resultsMinPageRows = 100
)

// resultsPages is a download's pages: where the next one starts, and the
// buffer the current one is encoded into (one buffer, reused).
type resultsPages struct {
	p     db.ListResultsParams
	last  int // the list's last row
	rows  int // row numbers per page
	buf   bytes.Buffer
	flush func()                         // moves what the encoder keeps into buf
	take  func(*classifier.ListRow) bool // encodes a row; false once buf is full
}

func newResultsPages(format listFormat, answerField string, escape bool, p db.ListResultsParams, last int) *resultsPages {
	d := &resultsPages{p: p, last: last, rows: resultsPageRows, flush: func() {}}
	d.buf.Grow(64 << 10)
	full := func() bool { return d.buf.Len() >= resultsPageBytes }
	if format == formatCSV {
		cw := csv.NewWriter(&d.buf)
		_ = cw.Write(wire.ListRowColumns(answerField))
		var fields []string
		d.take = func(r *classifier.ListRow) bool {
			row := wire.NewListRow(r, answerField)
			fields = row.CSV(fields[:0])
			if escape {
				csvcell.EscapeAll(fields)
			}
			_ = cw.Write(fields) // into a bytes.Buffer: no error
			return !full()
		}
		d.flush = cw.Flush
	} else {
		d.rows = resultsPageRowsNDJSON
		enc := json.NewEncoder(&d.buf)
		enc.SetEscapeHTML(false)
		d.take = func(r *classifier.ListRow) bool {
			_ = enc.Encode(wire.NewListRow(r, answerField)) // a ListRow always encodes
			return !full()
		}
	}
	return d
}

// done reports whether every page has been read.
func (d *resultsPages) done() bool { return d.p.After >= d.last }

// resultsPage reads a download's next page into d.buf, on a connection it
// takes within DBTimeout and gives back before it returns.
func (s *Server) resultsPage(ctx context.Context, d *resultsPages) error {
	defer d.flush()
	if d.done() {
		return nil
	}
	if d.last-d.p.After >= d.rows {
		// A whole page: its buffer at its size once, rather than doubled
		// past it as it grows.
		d.buf.Grow(resultsPageBytes + resultsRowSlack)
	}
	conn, err := s.pool().Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	d.p.Through = min(d.p.After+d.rows, d.last)
	next, err := db.ListResultsPage(ctx, conn, d.p, d.take)
	if err != nil {
		return err
	}
	if next < d.p.Through { // the page filled its buffer
		d.rows = max(d.rows/2, resultsMinPageRows)
	}
	d.p.After = next
	return nil
}

// negotiateResults picks CSV or NDJSON from Accept: CSV when both or
// anything goes; false when neither is acceptable.
func negotiateResults(accept string) (listFormat, bool) {
	if strings.TrimSpace(accept) == "" {
		return formatCSV, true
	}
	ndjson := false
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(part)), ";")
		switch strings.TrimSpace(mt) {
		case "text/csv", "text/*", "*/*":
			return formatCSV, true
		case "application/x-ndjson", "application/jsonl", "application/*":
			ndjson = true
		}
	}
	if ndjson {
		return formatNDJSON, true
	}
	return "", false
}
