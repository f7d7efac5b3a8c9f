package httpapi

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
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
// else jobs.AcceptList writes the rows, the list, its first chunk and the
// key, and it answers 202. fingerprint identifies the request for the key.
func (s *Server) listStore(ctx context.Context, c *gin.Context, caller Caller, req listRequest, rows *listReader, sp *spool, fingerprint []byte) {
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

	// 2. The rows (from the spool at full speed), the caller's limits, the
	// list, its first chunk and the key: jobs.AcceptList.
	l := &classifier.List{ID: id, Caller: caller.Name, Classifier: req.cls.Name, CallbackURL: req.callbackURL,
		Rows: rows.rows, Domains: rows.domains, Duplicates: rows.duplicates, Rejected: rows.rejected,
		Tier: req.tier, Want: req.want}
	accepted := wire.ListAccepted{ListID: id.String(), Status: classifier.StatusPending,
		StatusURL: wire.ListStatusURL(id.String()), ResultsURL: wire.ListResultsURL(id.String()), Classifier: req.cls.Name,
		Rows: l.Rows, Domains: l.Domains, Duplicates: l.Duplicates, Rejected: l.Rejected,
		RejectedSample: rows.sample}
	if accepted.RejectedSample == nil {
		accepted.RejectedSample = []wire.RejectedRow{}
	}
	resp, _ := json.Marshal(accepted)
	// The rows an override or a fresh cached answer answers are written
	// answered (a CRM export uploaded again ends with its upload).
	a := jobs.ListAccept{List: l, Admit: s.listAdmit(caller, req.partial),
		Answer: &jobs.AnswerRules{Rows: func() (db.ListRowSource, error) { return sp.read() },
			Freshness: s.cfg.Estimate.Freshness, Now: time.Now(), Dir: s.cfg.Lists.SpoolDir}}
	if req.idemKey != "" {
		a.Key = &db.IdempotencyKey{Caller: caller.Name, Key: req.idemKey, ListID: id, Fingerprint: fingerprint, Response: resp}
	}
	start := time.Now()
	answered, err := jobs.AcceptList(ctx, tx, s.cfg.River, s.cfg.Queue, a)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if err := db.Commit(ctx, tx); err != nil {
		s.writeError(c, err)
		return
	}
	s.cfg.ListCounts.OnRows(classifier.StatusRejected, l.Rejected)
	s.cfg.ListCounts.OnRows(classifier.StatusCompleted, answered.Rows)
	s.cfg.ListCounts.OnAnswered(l.Classifier, classifier.SourceOverride, answered.Override)
	s.cfg.ListCounts.OnAnswered(l.Classifier, classifier.SourceCache, answered.Cache)
	if answered.LookedUp {
		s.cfg.Logger.InfoContext(ctx, "list rows answered at upload", "list_id", id.String(), "rows", l.Rows,
			"answered", answered.Rows, "override", answered.OverrideRows, "cache", answered.CacheRows,
			"scratch_bytes", answered.ScratchBytes, "took", time.Since(start).Round(time.Millisecond).String())
	}
	c.Header("Location", accepted.StatusURL)
	c.Data(http.StatusAccepted, "application/json", resp)
}

// listAdmit checks an upload's list against caller's limits, in the
// upload's transaction once its rows are in: its daily model budget
// (unless partial), then, under the caller's lock so that the count is
// exact, its active lists and its stored rows.
func (s *Server) listAdmit(caller Caller, partial bool) func(context.Context, pgx.Tx, *classifier.List) error {
	return func(ctx context.Context, tx pgx.Tx, l *classifier.List) error {
		if err := s.listBudget(ctx, tx, l, partial); err != nil {
			return err
		}
		if err := db.ListActiveLock(ctx, tx, caller.Name); err != nil {
			return err
		}
		if err := s.listSlotFree(ctx, caller, tx); err != nil {
			return err
		}
		return s.listRowsFit(ctx, caller, l.Rows, tx)
	}
}

var errKeyReused = &problem{status: http.StatusUnprocessableEntity, slug: "idempotency-key-reused",
	detail: "This Idempotency-Key was already used with a different request."}

// listSlotFree returns a 429 problem when caller has MaxActiveLists lists not
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
	if max := caller.MaxActiveLists; n+uploading >= max {
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

// noValidRows is the 422 of a list without one domain: every row, its
// input and its reason, the first MaxRejectedSample of them.
func noValidRows(rows *listReader) error {
	items := make([]wire.ItemError, len(rows.sample))
	for i, r := range rows.sample {
		items[i] = wire.ItemError{Row: r.Row, Input: r.Input, Reason: r.Reason}
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
