package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi/wire"
	"github.com/domainclass/domainclass/httpapi/wire/csvcell"
	"github.com/domainclass/domainclass/jobs"
)

// listTimeout bounds an upload, a results download and a cancel: a
// million rows take seconds on a fast link, minutes on a slow one. The
// server's own read and write timeouts are for 64 KiB requests.
const listTimeout = 30 * time.Minute

// listRequest is what a POST /lists asks for, besides its rows.
type listRequest struct {
	cls         *classifier.Classifier
	dryRun      bool
	tier        string
	maxAge      time.Duration
	refresh     bool
	want        classifier.Want
	format      listFormat
	columns     csvColumns
	idemKey     string
	callbackURL string
	// partial: run up to the caller's daily model budget rather than be
	// refused when the estimate is over it (?budget=partial).
	partial bool
}

// listRequestOf reads a POST /lists's query and headers, or returns the
// problem of the first that is wrong.
func (s *Server) listRequestOf(c *gin.Context) (req listRequest, err error) {
	q := c.Request.URL.Query()
	if req.cls, err = s.cfg.Registry.Get(cmp.Or(q.Get("classifier"), classifier.DefaultClassifier)); err != nil {
		return req, err
	}
	if req.dryRun, err = boolParam(q, "dry_run"); err != nil {
		return req, err
	}
	if req.tier, err = tierParam(q); err != nil {
		return req, err
	}
	if req.maxAge, err = parseMaxAge(firstOf(q["max_age"])); err != nil {
		return req, err
	}
	if req.refresh, err = boolParam(q, "refresh"); err != nil {
		return req, err
	}
	req.want = want(req.maxAge, req.refresh)
	if req.partial, err = budgetParam(q); err != nil {
		return req, err
	}
	if req.format, err = listFormatOf(c.GetHeader("Content-Type")); err != nil {
		return req, err
	}
	if req.columns, err = csvColumnsParam(q, req.format); err != nil {
		return req, err
	}
	if req.idemKey, err = idempotencyKey(c.GetHeader("Idempotency-Key")); err != nil {
		return req, err
	}
	req.callbackURL, err = s.callbackURL(c.GetHeader("X-Callback-URL"))
	return req, err
}

// listCreate handles POST /lists. It reads the whole body first (at no
// less than the minimum rate), parsing and normalizing its rows into a
// spool file, while it holds no database connection; then, in one
// transaction, it writes the rows from the spool with COPY, the list and
// its first chunks, and answers 202; or, with dry_run=true, answers 200
// with an estimate and writes nothing. Nothing is written on any other
// answer.
func (s *Server) listCreate(c *gin.Context) {
	caller := callerOf(c)
	req, err := s.listRequestOf(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	// Counted before a byte of the body is read, dry runs included.
	leave, lists, err := s.uploads.enter(caller.Name, req.dryRun)
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer leave()
	if !req.dryRun {
		// A caller at its limit of lists is told before it sends a million
		// rows; its other uploads in progress here would be lists too. The
		// count is checked again, under a lock, before the list is written.
		if err := s.listSlotFreeUploading(c.Request.Context(), caller, lists); err != nil {
			s.writeError(c, err)
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
		err := s.listRowsFit(ctx, caller, 1)
		cancel()
		if err != nil {
			s.writeError(c, err)
			return
		}
	}
	_ = http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(listTimeout))
	body, err := openListBody(c.Request, http.NewResponseController(c.Writer), s.cfg.Lists, req.idemKey != "")
	defer func() {
		leave() // the upload is over for its caller, before a refused body's rest is drained
		body.finish(c)
	}()
	if err != nil {
		s.writeError(c, err)
		return
	}
	rows := newListReader(req.format, body, s.cfg.Lists.MaxRows, req.columns)
	sp, err := s.spoolRows(rows)
	if sp != nil {
		defer sp.Close()
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	if req.dryRun {
		s.listEstimate(ctx, c, req.cls, req.tier, req.want, rows, sp)
		return
	}
	s.listStore(ctx, c, caller, req, rows, sp, listFingerprint(req, body.hash))
}

// spoolRows reads every row of an upload into a spool, holding no database
// connection. It returns the spool (to be closed, even with an error), and
// the problem of a list refused: a limit crossed, a body that cannot be
// read, no valid row.
func (s *Server) spoolRows(rows *listReader) (*spool, error) {
	sp, err := newSpool(s.cfg.Lists.SpoolDir, spoolLimit(s.cfg.Lists))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		if err := sp.add(rows.Row()); err != nil {
			return sp, err
		}
	}
	if err := rows.Err(); err != nil {
		return sp, err
	}
	if rows.domains == 0 {
		return sp, noValidRows(rows)
	}
	return sp, nil
}

// listStore writes an upload whose rows are in sp, in one transaction: an
// Idempotency-Key already used replays its first answer (or is refused),
// else the rows are copied, and the list, its first chunks and the key are
// written. fingerprint identifies the request for the key.
func (s *Server) listStore(ctx context.Context, c *gin.Context, caller Caller, req listRequest, rows *listReader, sp *spool, fingerprint []byte) {
	src, err := sp.read()
	if err != nil {
		s.writeError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.writeError(c, err)
		return
	}
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)

	// 1. An Idempotency-Key already used replays its first answer.
	if req.idemKey != "" {
		prior, err := s.idempotencyReplay(ctx, tx, db.IdempotencyKey{Caller: caller.Name, Key: req.idemKey, Fingerprint: fingerprint})
		if err == nil && prior != nil && prior.ListID == uuid.Nil {
			err = errKeyReused // a job's key
		}
		if err != nil {
			s.writeError(c, err)
			return
		}
		if prior != nil {
			c.Header("Idempotent-Replayed", "true")
			c.Header("Location", wire.ListStatusURL(prior.ListID.String()))
			c.Data(http.StatusAccepted, "application/json", prior.Response)
			return
		}
	}

	// 2. The rows, from the spool at full speed.
	if _, err := db.ListRowsCopy(ctx, tx, id, src); err != nil {
		s.writeError(c, err)
		return
	}
	s.listInsert(ctx, c, tx, caller, req, id, rows, fingerprint)
}

// listInsert writes the list whose rows tx copied, under the caller's lock
// so that the active-list limit is exact, and its first chunks, then the
// key; commits, and answers 202.
func (s *Server) listInsert(ctx context.Context, c *gin.Context, tx pgx.Tx, caller Caller, req listRequest, id uuid.UUID,
	rows *listReader, fingerprint []byte) {
	l := &classifier.List{ID: id, Caller: caller.Name, Classifier: req.cls.Name, CallbackURL: req.callbackURL,
		Rows: rows.rows, Domains: rows.domains, Duplicates: rows.duplicates, Rejected: rows.rejected,
		ChunkRows: s.cfg.Lists.Queue.ListChunkRows, Tier: req.tier, Want: req.want, Retention: s.cfg.Lists.Queue.ListRetention}
	if req.tier == classifier.TierEconomy {
		// A chunk of an economy list is one provider batch.
		l.ChunkRows = s.cfg.Lists.Queue.BatchMaxRequests
	}
	l.Chunks = (l.Rows + l.ChunkRows - 1) / l.ChunkRows
	if err := s.listBudget(ctx, tx, l, req.partial); err != nil {
		s.writeError(c, err)
		return
	}
	if err := db.ListActiveLock(ctx, tx, caller.Name); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.listSlotFree(ctx, caller, tx); err != nil {
		s.writeError(c, err)
		return
	}
	if err := s.listRowsFit(ctx, caller, l.Rows, tx); err != nil {
		s.writeError(c, err)
		return
	}
	first := jobs.FirstChunks(id)
	if err := db.ListInsert(ctx, tx, l, len(first)); err != nil {
		s.writeError(c, err)
		return
	}
	if _, err := s.cfg.River.InsertManyTx(ctx, tx, first); err != nil {
		s.writeError(c, fmt.Errorf("error enqueueing the list's chunks: %w", db.Translate(err)))
		return
	}
	accepted := wire.ListAccepted{ListID: id.String(), Status: classifier.StatusPending,
		StatusURL: wire.ListStatusURL(id.String()), ResultsURL: wire.ListResultsURL(id.String()), Classifier: req.cls.Name,
		Rows: l.Rows, Domains: l.Domains, Duplicates: l.Duplicates, Rejected: l.Rejected,
		RejectedSample: rows.sample}
	if accepted.RejectedSample == nil {
		accepted.RejectedSample = []wire.RejectedRow{}
	}
	resp, _ := json.Marshal(accepted)
	if req.idemKey != "" {
		if err := db.IdempotencyKeyInsert(ctx, tx, db.IdempotencyKey{Caller: caller.Name, Key: req.idemKey, ListID: id,
			Fingerprint: fingerprint, Response: resp}); err != nil {
			s.writeError(c, err)
			return
		}
	}
	if err := db.Commit(ctx, tx); err != nil {
		s.writeError(c, err)
		return
	}
	s.cfg.Lists.OnRows(classifier.StatusRejected, l.Rejected)
	c.Header("Location", accepted.StatusURL)
	c.Data(http.StatusAccepted, "application/json", resp)
}

var errKeyReused = &problem{status: http.StatusUnprocessableEntity, slug: "idempotency-key-reused",
	detail: "This Idempotency-Key was already used with a different request."}

// listSlotFree returns a 429 problem when caller has MaxActive lists not
// yet ended; exec is the transaction when given. It waits for the database
// no longer than any short request.
func (s *Server) listSlotFree(ctx context.Context, caller Caller, exec ...db.DBTX) error {
	return s.listSlotFreeUploading(ctx, caller, 0, exec...)
}

// listSlotFreeUploading is listSlotFree counting uploading, the caller's
// uploads in progress that would be lists, as lists.
func (s *Server) listSlotFreeUploading(ctx context.Context, caller Caller, uploading int, exec ...db.DBTX) error {
	var e db.DBTX = s.cfg.DB.Pool
	if len(exec) > 0 {
		e = exec[0]
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	n, err := db.ListActiveCount(ctx, e, caller.Name)
	if err != nil {
		return err
	}
	if max := s.cfg.Lists.MaxActive; n+uploading >= max {
		also := ""
		if uploading > 0 {
			also = fmt.Sprintf(" (and %d uploads in progress)", uploading)
		}
		return &problem{status: http.StatusTooManyRequests, slug: "too-many-lists", retryAfter: listRetryAfter,
			detail: fmt.Sprintf("You have %d lists not yet ended%s; the limit is %d. Wait for one to end, or cancel one.", n, also, max)}
	}
	return nil
}

// listRetryAfter is the Retry-After of a refusal for too many active lists:
// lists run for minutes.
const listRetryAfter = time.Minute

// noValidRows is the 422 of a list without one domain: every row's reason,
// the first MaxRejectedSample of them.
func noValidRows(rows *listReader) error {
	items := make([]classifier.ItemError, len(rows.sample))
	for i, r := range rows.sample {
		items[i] = classifier.ItemError{Input: r.Input, Reason: fmt.Sprintf("row %d: %s", r.Row, r.Reason)}
	}
	detail := "The list has no rows."
	if rows.rows > 0 {
		detail = fmt.Sprintf("None of the list's %d rows is a domain; see errors (the first %d).", rows.rows, wire.MaxRejectedSample)
	}
	return &problem{status: http.StatusUnprocessableEntity, slug: "no-valid-rows", detail: detail, items: items}
}

// listFingerprint identifies an upload for Idempotency-Key: every input
// that changes what it makes (the classifier, format, callback, body as
// decompressed, freshness, tier and column mapping) is in it. bodyHash is
// the body's hash as read (nil: not hashed, no key).
func listFingerprint(req listRequest, bodyHash hash.Hash) []byte {
	if bodyHash == nil {
		return nil
	}
	fields := []any{"list", req.cls.Name, req.format, req.callbackURL, bodyHash.Sum(nil)}
	// Inputs added later join only when they are not their defaults, so
	// that keys stored before them keep their fingerprints.
	if req.maxAge > 0 || req.refresh {
		fields = append(fields, req.maxAge, req.refresh)
	}
	if req.tier != classifier.TierStandard {
		fields = append(fields, "tier", req.tier)
	}
	if domain, ref := req.columns.key(); domain != "" || ref != "" {
		fields = append(fields, "columns", domain, ref)
	}
	if req.partial {
		fields = append(fields, "budget", "partial")
	}
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return sum[:]
}

// listEstimate answers POST /lists?dry_run=true: how many domains are
// overridden, cached and fresh, what the fresh ones cost with the price table,
// and how long the list takes (estimate: the deployment's measured
// throughput, the rows' CPU, the lists it shares with). It writes nothing.
func (s *Server) listEstimate(ctx context.Context, c *gin.Context, cls *classifier.Classifier, tier string, fresh classifier.Want,
	rows *listReader, sp *spool) {
	src, err := sp.read()
	if err != nil {
		s.writeError(c, err)
		return
	}
	var est wire.ListEstimate
	err = pgx.BeginFunc(ctx, s.pool(), func(tx pgx.Tx) error {
		var err error
		est.Overridden, est.Cached, err = db.DomainsAnswered(ctx, tx, cls.Name, spoolDomains{src}, s.cfg.Lists.Freshness, fresh, time.Now())
		if err != nil {
			return err
		}
		est.Known = est.Overridden // its deprecated name
		est.Rows, est.Domains, est.Duplicates, est.Rejected = rows.rows, rows.domains, rows.duplicates, rows.rejected
		est.Model = s.cfg.Lists.Model
		stats, err := db.ModelStatsRecent(ctx, tx, cls.Name, modelStatsSample)
		if err != nil {
			return err
		}
		est.Fresh = est.Domains - est.Overridden - est.Cached
		est.ModelCalls = est.Fresh
		load, err := db.LoadRecent(ctx, tx, throughputWindow, throughputStep)
		if err != nil {
			return err
		}
		var standard, economy wire.TierEstimate
		standard, economy, est.Basis = s.cfg.Lists.estimate(est, stats, load)
		est.Tier, est.Tiers = tier, map[string]wire.TierEstimate{classifier.TierStandard: standard, classifier.TierEconomy: economy}
		est.EstimatedSeconds, est.EstimatedCostUSD = est.Tiers[tier].EstimatedSeconds, est.Tiers[tier].EstimatedCostUSD
		return errDryRun // nothing that was written outlives the estimate
	})
	if err != nil && !errors.Is(err, errDryRun) {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, est)
}

var errDryRun = errors.New("dry run")

// modelStatsSample is how many recent model answers the estimate reads.
const modelStatsSample = 1000

// batchWindowSeconds is the economy tier's bound: the provider's 24-hour
// completion window (most batches end within hours).
const batchWindowSeconds = 24 * 60 * 60

// firstOf is a query parameter's first value, "" when it has none.
func firstOf(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// tierParam reads ?tier=standard|economy (standard when absent).
func tierParam(q map[string][]string) (string, error) {
	switch t := firstOf(q["tier"]); t {
	case "", classifier.TierStandard:
		return classifier.TierStandard, nil
	case classifier.TierEconomy:
		return t, nil
	default:
		return "", &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("tier must be standard or economy, not %q.", t)}
	}
}

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
				&river.InsertOpts{MaxAttempts: s.cfg.Lists.Queue.WebhookMaxAttempts()}); err != nil {
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
		s.cfg.Lists.OnRows(classifier.StatusCancelled, l.Unfinished())
		s.cfg.Lists.OnEnded(classifier.StatusCancelled)
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

// extendDeadlines lets a list request read and write for listTimeout.
func extendDeadlines(c *gin.Context) {
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Now().Add(listTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(listTimeout))
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

func boolParam(q map[string][]string, name string) (bool, error) {
	v := firstOf(q[name])
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be true or false, not %q.", name, v)}
	}
	return b, nil
}

// maxRowParam bounds a row number in a query (?after=): rows are numbered
// in Postgres's int4, and a larger number, read as Go's int, could not be
// sent to it (the stream was cut off with a 200 already out).
const maxRowParam = math.MaxInt32

// intParam reads a query parameter that is a whole number from 0 to max,
// decimal digits only; 0 when absent. Anything else is a 400 naming it.
func intParam(q map[string][]string, name string, max int) (int, error) {
	vs := q[name]
	if len(vs) == 0 || vs[0] == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(vs[0], 10, 63)
	if err != nil || n > uint64(max) {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be a row number from 0 to %d, not %q.", name, max, classifier.Truncate(vs[0], 40))}
	}
	return int(n), nil
}

// rowStatuses are the statuses a list row is reported with.
var rowStatuses = []classifier.Status{classifier.StatusPending, classifier.StatusCompleted, classifier.StatusFailed,
	classifier.StatusRejected, classifier.StatusCancelled}

func statusParam(q map[string][]string) ([]classifier.Status, error) {
	var out []classifier.Status
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			st := classifier.Status(strings.ToUpper(strings.TrimSpace(s)))
			if st == "" {
				continue
			}
			if !slices.Contains(rowStatuses, st) {
				return nil, &problem{status: http.StatusBadRequest, slug: "invalid-query",
					detail: fmt.Sprintf("status %q is not one of PENDING, COMPLETED, FAILED, REJECTED, CANCELLED.", s)}
			}
			out = append(out, st)
		}
	}
	return out, nil
}
