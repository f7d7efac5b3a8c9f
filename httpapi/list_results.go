package httpapi

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

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
// The rows are read a page at a time (resultsReader): each page's query
// takes a connection and gives it back, and the page is written at no less
// than the minimum rate (rateWriter) while the next one is read. So a
// client that reads slowly holds a socket and two pages of encoded rows,
// never a connection, and one that reads too slowly is cut off. Downloads
// in progress are bounded per caller and per process (429).
func (s *Server) listResults(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	rq, ok := s.readResultsQuery(c)
	if !ok {
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
	r := s.newResultsReader(rq.format, s.cfg.Registry.AnswerField(l.Classifier), rq.escape, db.ListResultsParams{ListID: id,
		After: rq.after, Statuses: rq.statuses, ListStatus: l.Status, ListError: l.Error, URLsOnly: rq.format == formatCSV}, l.Rows)
	// The first page is read before the header goes out, so that a database
	// that cannot be had is a 503 still.
	pg := r.next(ctx)
	if pg.err != nil {
		s.writeError(c, pg.err)
		return
	}
	c.Header("Content-Type", string(rq.format)+"; charset=utf-8")
	c.Status(http.StatusOK)
	w := newRateWriter(c.Writer, http.NewResponseController(c.Writer), s.cfg.Lists.DownloadMinRate, s.cfg.Lists.DownloadRateWindow)
	rctx, rcancel := context.WithCancel(ctx)
	defer r.wg.Wait() // after rcancel: the reader has given its connection back before the download ends
	defer rcancel()
	pages := r.ahead(rctx)
	for {
		if err := w.page(pg.buf.Bytes()); err != nil {
			s.stopResults(ctx, id, w, err)
		}
		r.recycle(pg)
		var more bool
		if pg, more = <-pages; !more {
			break
		}
		if pg.err != nil {
			s.stopResults(ctx, id, w, pg.err)
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

// resultsQuery is what a GET /lists/{list_id}/results asks for.
type resultsQuery struct {
	after    int
	statuses []classifier.Status
	escape   bool
	format   listFormat
}

// readResultsQuery reads listResults' ?after=, ?status=, ?escape_formulas= and
// Accept, or writes the problem with them and returns false.
func (s *Server) readResultsQuery(c *gin.Context) (resultsQuery, bool) {
	q := c.Request.URL.Query()
	after, err := intParam(q, "after", maxRowParam)
	if err != nil {
		s.writeError(c, err)
		return resultsQuery{}, false
	}
	statuses, err := statusParam(q)
	if err != nil {
		s.writeError(c, err)
		return resultsQuery{}, false
	}
	escape, err := boolParam(q, "escape_formulas")
	if err != nil {
		s.writeError(c, err)
		return resultsQuery{}, false
	}
	escape = escape || firstOf(q["escape_formulas"]) == "" // on unless turned off
	format, ok := negotiateResults(c.GetHeader("Accept"))
	if !ok {
		writeProblem(c, http.StatusNotAcceptable, "not-acceptable",
			"Results come as text/csv or application/x-ndjson; send one of them in Accept.", nil)
		return resultsQuery{}, false
	}
	return resultsQuery{after: after, statuses: statuses, escape: escape, format: format}, true
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
// key), so that a selective ?status= reads no more than the range; its
// size follows the rows' (nextPageRows), so that a page is about
// resultsPageBytes of encoded rows, and it ends early should it fill them.
// Each page is a query's round trip, and the next page is read while one
// is written, so that Postgres, the encoding and the client work at once
// as they did with a cursor (the results bar: a million CSV rows at
// ≥ 200k rows/s).
const (
	// resultsPageRows and resultsPageRowsNDJSON are a download's first
	// page: a CSV row is 40–450 bytes (an answered one keeps its evidence
	// addresses); an NDJSON row carries its evidence (about 1.7 kB with five
	// pages of it).
	resultsPageRows       = 5_000
	resultsPageRowsNDJSON = 1_000
	// resultsPageBytes is what a page holds: a download holds two (the one
	// written, the one read ahead), each in a buffer with resultsRowSlack
	// more for the row that crosses the bound. A million unanswered CSV
	// rows are then about 45 pages.
	resultsPageBytes = 1 << 20
	resultsRowSlack  = 64 << 10
	// resultsMinPageRows and resultsMaxPageRows bound a page's rows: a
	// page filtered down to few rows reads at most 50,000 of them by key
	// (a few milliseconds of Postgres).
	resultsMinPageRows = 100
	resultsMaxPageRows = 50_000
)

// resultsPage is one page of a download: its rows, encoded, or the error
// that ended the reading. Its buffer and encoder are reused.
type resultsPage struct {
	buf   bytes.Buffer
	flush func()                         // moves what the encoder keeps into buf
	take  func(*classifier.ListRow) bool // encodes a row; false once buf is full
	err   error
}

func newResultsPage(format listFormat, answerField string, escape, header bool) *resultsPage {
	pg := &resultsPage{flush: func() {}}
	full := func() bool { return pg.buf.Len() >= resultsPageBytes }
	if format == formatNDJSON {
		enc := json.NewEncoder(&pg.buf)
		enc.SetEscapeHTML(false)
		pg.take = func(r *classifier.ListRow) bool {
			_ = enc.Encode(wire.NewListRow(r, answerField)) // a ListRow always encodes
			return !full()
		}
		return pg
	}
	cw := csv.NewWriter(&pg.buf)
	if header {
		_ = cw.Write(wire.ListRowColumns(answerField))
	}
	var fields []string
	pg.take = func(r *classifier.ListRow) bool {
		row := wire.NewListRow(r, answerField)
		fields = row.CSV(fields[:0])
		if escape {
			csvcell.EscapeAll(fields)
		}
		_ = cw.Write(fields) // into a bytes.Buffer: no error
		return !full()
	}
	pg.flush = cw.Flush
	return pg
}

// resultsReader reads a download's pages in order, into two buffers that
// take turns: the one being written, and the one read ahead.
type resultsReader struct {
	pool db.Bounded
	p    db.ListResultsParams // p.After: where the next page starts
	last int                  // the list's last row
	rows int                  // row numbers per page
	free chan *resultsPage
	wg   sync.WaitGroup
}

func (s *Server) newResultsReader(format listFormat, answerField string, escape bool, p db.ListResultsParams, last int) *resultsReader {
	r := &resultsReader{pool: s.pool(), p: p, last: last, rows: resultsPageRows, free: make(chan *resultsPage, 2)}
	if format == formatNDJSON {
		r.rows = resultsPageRowsNDJSON
	}
	r.free <- newResultsPage(format, answerField, escape, true) // the first page has the CSV's header
	r.free <- newResultsPage(format, answerField, escape, false)
	return r
}

// done reports whether every page has been read.
func (r *resultsReader) done() bool { return r.p.After >= r.last }

// next reads the next page into a free buffer (an empty page once every
// page has been read), on a connection it takes within DBTimeout and gives
// back before it returns.
func (r *resultsReader) next(ctx context.Context) *resultsPage {
	var pg *resultsPage
	select {
	case pg = <-r.free:
	case <-ctx.Done():
		return &resultsPage{err: ctx.Err()}
	}
	defer pg.flush()
	if r.done() {
		return pg
	}
	if r.last-r.p.After >= r.rows {
		// A whole page: its buffer at its size once, rather than doubled
		// past it as it grows.
		pg.buf.Grow(resultsPageBytes + resultsRowSlack)
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		pg.err = err
		return pg
	}
	defer conn.Release()
	r.p.Through = min(r.p.After+r.rows, r.last)
	pg.flush()
	start := pg.buf.Len()
	next, err := db.ListResultsPage(ctx, conn, r.p, pg.take)
	if err != nil {
		pg.err = err
		return pg
	}
	pg.flush()
	r.rows = nextPageRows(next-r.p.After, pg.buf.Len()-start)
	r.p.After = next
	return pg
}

// nextPageRows is the rows of the next page, after a page that read the
// given rows (by number) into the given bytes: as many as fill
// resultsPageBytes at that size (nine tenths of it, so that the next page
// seldom ends early), at least resultsMinPageRows, at most
// resultsMaxPageRows (a page that ?status= filters down to nothing reads
// no more than that).
func nextPageRows(rows, bytes int) int {
	if bytes == 0 {
		return resultsMaxPageRows
	}
	n := int(int64(rows) * resultsPageBytes * 9 / 10 / int64(bytes))
	return min(max(n, resultsMinPageRows), resultsMaxPageRows)
}

// ahead reads the pages after the first on a goroutine of its own, one
// page ahead of the writer, until the last page, an error (the page that
// carries it is the last) or ctx's end. Wait for r.wg after ending ctx.
func (r *resultsReader) ahead(ctx context.Context) <-chan *resultsPage {
	pages := make(chan *resultsPage)
	r.wg.Go(func() {
		defer close(pages)
		for !r.done() {
			pg := r.next(ctx)
			select {
			case pages <- pg:
			case <-ctx.Done():
				return
			}
			if pg.err != nil {
				return
			}
		}
	})
	return pages
}

// recycle gives a written page's buffer back for another page.
func (r *resultsReader) recycle(pg *resultsPage) {
	pg.buf.Reset()
	r.free <- pg
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
