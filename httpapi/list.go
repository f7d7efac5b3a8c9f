package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
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
	"github.com/domainclass/domainclass/jobs"
)

// listTimeout bounds an upload, a results download and a cancel: a
// million rows take seconds on a fast link, minutes on a slow one. The
// server's own read and write timeouts are for 64 KiB requests.
const listTimeout = 30 * time.Minute

// listCreate handles POST /lists: it reads the rows as they arrive, writes
// them with COPY, and queues the list's first chunks, all in one
// transaction, then answers 202; or, with dry_run=true, answers 200 with an
// estimate and writes nothing. Nothing is written on any other answer.
func (s *Server) listCreate(c *gin.Context) {
	caller := callerOf(c)
	q := c.Request.URL.Query()
	cls, err := s.cfg.Registry.Get(cmp.Or(q.Get("classifier"), classifier.DefaultClassifier))
	if err != nil {
		s.writeError(c, err)
		return
	}
	dryRun, err := boolParam(q, "dry_run")
	if err != nil {
		s.writeError(c, err)
		return
	}
	tier, err := tierParam(q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	maxAge, err := parseMaxAge(firstOf(q["max_age"]))
	if err != nil {
		s.writeError(c, err)
		return
	}
	refresh, err := boolParam(q, "refresh")
	if err != nil {
		s.writeError(c, err)
		return
	}
	fresh := want(maxAge, refresh)
	partial, err := budgetParam(q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	format, err := listFormatOf(c.GetHeader("Content-Type"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	idemKey, err := idempotencyKey(c.GetHeader("Idempotency-Key"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	callbackURL, err := s.callbackURL(c.GetHeader("X-Callback-URL"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	extendDeadlines(c)
	body, err := openListBody(c.Request, s.cfg.Lists.MaxBytes, idemKey != "")
	defer body.finish(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	rows := newListReader(format, body, s.cfg.Lists.MaxRows)
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	if dryRun {
		s.listEstimate(ctx, c, cls, tier, fresh, rows)
		return
	}
	// Before reading a million rows: a caller at its limit is told at once
	// (the count is checked again, under a lock, before the list is written).
	if err := s.listSlotFree(ctx, caller); err != nil {
		s.writeError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.writeError(c, err)
		return
	}

	tx, err := db.Begin(ctx, s.cfg.DB.Pool)
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)

	// 1. An Idempotency-Key already used replays its first answer (once the
	// body shows it is the same request).
	if idemKey != "" {
		locked, err := db.IdempotencyKeyLock(ctx, tx, caller.Name, idemKey)
		if err == nil && !locked {
			err = errKeyInFlight
		}
		if err != nil {
			s.writeError(c, err)
			return
		}
		prior, err := db.IdempotencyKeyGet(ctx, tx, caller.Name, idemKey)
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			s.writeError(c, err)
			return
		}
		if prior != nil {
			if err := body.drain(); err != nil {
				s.writeError(c, err)
				return
			}
			if !bytes.Equal(prior.Fingerprint, listFingerprint(cls.Name, format, callbackURL, maxAge, refresh, body)) || prior.ListID == uuid.Nil {
				s.writeError(c, errKeyReused)
				return
			}
			c.Header("Idempotent-Replayed", "true")
			c.Header("Location", wire.ListStatusURL(prior.ListID.String()))
			c.Data(http.StatusAccepted, "application/json", prior.Response)
			return
		}
	}

	// 2. The rows, as they are read: a bad body or a limit crossed on any
	// row refuses the list, and the rollback writes nothing.
	if _, err := db.ListRowsCopy(ctx, tx, id, rows); err != nil {
		s.writeError(c, err)
		return
	}
	if rows.domains == 0 {
		s.writeError(c, noValidRows(rows))
		return
	}

	// 3. The list, under the caller's lock so the active-list limit is exact,
	// and its first chunks, then the key.
	l := &classifier.List{ID: id, Caller: caller.Name, Classifier: cls.Name, CallbackURL: callbackURL,
		Rows: rows.rows, Domains: rows.domains, Duplicates: rows.duplicates, Rejected: rows.rejected,
		ChunkRows: s.cfg.Lists.Queue.ListChunkRows, Tier: tier, Want: fresh}
	if tier == classifier.TierEconomy {
		// A chunk of an economy list is one provider batch.
		l.ChunkRows = s.cfg.Lists.Queue.BatchMaxRequests
	}
	l.Chunks = (l.Rows + l.ChunkRows - 1) / l.ChunkRows
	if err := s.listBudget(ctx, tx, l, partial); err != nil {
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
	first := jobs.FirstChunks(id)
	if err := db.ListInsert(ctx, tx, l, len(first)); err != nil {
		s.writeError(c, err)
		return
	}
	if _, err := s.cfg.River.InsertManyTx(ctx, tx, first); err != nil {
		s.writeError(c, fmt.Errorf("error enqueueing the list's chunks: %w", err))
		return
	}
	accepted := wire.ListAccepted{ListID: id.String(), Status: classifier.StatusPending,
		StatusURL: wire.ListStatusURL(id.String()), ResultsURL: wire.ListResultsURL(id.String()), Classifier: cls.Name,
		Rows: l.Rows, Domains: l.Domains, Duplicates: l.Duplicates, Rejected: l.Rejected,
		RejectedSample: rows.sample}
	if accepted.RejectedSample == nil {
		accepted.RejectedSample = []wire.RejectedRow{}
	}
	resp, _ := json.Marshal(accepted)
	if idemKey != "" {
		if err := db.IdempotencyKeyInsert(ctx, tx, db.IdempotencyKey{Caller: caller.Name, Key: idemKey, ListID: id,
			Fingerprint: listFingerprint(cls.Name, format, callbackURL, maxAge, refresh, body), Response: resp}); err != nil {
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

var (
	errKeyInFlight = &problem{status: http.StatusConflict, slug: "idempotency-key-in-flight",
		detail: "A request with this Idempotency-Key is still being processed; retry later."}
	errKeyReused = &problem{status: http.StatusUnprocessableEntity, slug: "idempotency-key-reused",
		detail: "This Idempotency-Key was already used with a different request."}
)

// listSlotFree returns a 429 problem when caller has MaxActive lists not
// yet ended; exec is the transaction when given.
func (s *Server) listSlotFree(ctx context.Context, caller Caller, exec ...db.DBTX) error {
	var e db.DBTX = s.cfg.DB.Pool
	if len(exec) > 0 {
		e = exec[0]
	}
	n, err := db.ListActiveCount(ctx, e, caller.Name)
	if err != nil {
		return err
	}
	if max := s.cfg.Lists.MaxActive; n >= max {
		return &problem{status: http.StatusTooManyRequests, slug: "too-many-lists", retryAfter: listRetryAfter,
			detail: fmt.Sprintf("You have %d lists not yet ended; the limit is %d. Wait for one to end, or cancel one.", n, max)}
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

// listFingerprint identifies an upload for Idempotency-Key: the same
// classifier, format, callback and body (as decompressed) are the same
// request.
func listFingerprint(classifierName string, format listFormat, callbackURL string, maxAge time.Duration, refresh bool, body *listBody) []byte {
	h := sha256.New()
	fields := []any{"list", classifierName, format, callbackURL, body.hash.Sum(nil)}
	if maxAge > 0 || refresh { // keys used before max_age and refresh keep their fingerprints
		fields = append(fields, maxAge, refresh)
	}
	b, _ := json.Marshal(fields)
	h.Write(b)
	return h.Sum(nil)
}

// listEstimate answers POST /lists?dry_run=true: how many domains are
// known, cached and fresh, what the fresh ones cost with the price table,
// and how long the model needs for them, from the settings and the median
// latency of recent model calls. It writes nothing.
func (s *Server) listEstimate(ctx context.Context, c *gin.Context, cls *classifier.Classifier, tier string, fresh classifier.Want, rows *listReader) {
	var est wire.ListEstimate
	err := pgx.BeginFunc(ctx, s.cfg.DB.Pool, func(tx pgx.Tx) error {
		var err error
		est.Known, est.Cached, err = db.DomainsAnswered(ctx, tx, cls.Name, distinctDomains{rows}, s.cfg.Lists.Freshness, fresh, time.Now())
		if err != nil {
			return err
		}
		if rows.domains == 0 {
			return noValidRows(rows)
		}
		est.Rows, est.Domains, est.Duplicates, est.Rejected = rows.rows, rows.domains, rows.duplicates, rows.rejected
		est.Model = s.cfg.Lists.Model
		stats, err := db.ModelStatsRecent(ctx, tx, cls.Name, modelStatsSample)
		if err != nil {
			return err
		}
		est.Fresh = est.Domains - est.Known - est.Cached
		est.ModelCalls = est.Fresh
		standard, economy := s.cfg.Lists.estimate(est, stats)
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

// distinctDomains is the db.DomainSource of an upload's distinct domains.
type distinctDomains struct{ r *listReader }

func (d distinctDomains) Next() bool     { return d.r.DistinctNext() }
func (d distinctDomains) Domain() string { return d.r.cur.Domain }
func (d distinctDomains) Err() error     { return d.r.err }

// modelStatsSample is how many recent model answers the estimate reads.
const modelStatsSample = 1000

// estimate is what the fresh domains cost in each tier (nil for a model
// the price table does not list) and how long they take: at the model's
// pace for one worker process in the standard tier; within the provider's
// 24-hour window in the economy tier.
func (l ListConfig) estimate(est wire.ListEstimate, stats db.ModelStats) (standard, economy wire.TierEstimate) {
	perCall := l.DefaultCallSeconds
	promptTokens, completionTokens := float64(DefaultPromptTokens), float64(DefaultCompletionTokens)
	if stats.Samples > 0 {
		perCall = stats.MedianLatency.Seconds() + l.SearchSeconds
		promptTokens, completionTokens = stats.PromptTokens, stats.CompletionTokens
	}
	// Little's law: C calls in flight of perCall seconds each make C/perCall
	// a second, unless the rate limit allows fewer.
	perSecond := math.Min(float64(l.ModelConcurrency)/math.Max(perCall, 0.001), float64(l.ModelRatePerMinute)/60)
	seconds := float64(est.Fresh) / perSecond
	// Known and cached answers are the database's work: beyond about 32 at
	// once they only queue for connections, however many chunks run.
	seconds += float64(est.Known+est.Cached) * cachedSeconds / float64(max(min(l.Queue.ListWorkers*l.Queue.ListDomainConcurrency, 32), 1))
	seconds = math.Round(seconds*10) / 10
	standard.EstimatedSeconds, economy.EstimatedSeconds = seconds, batchWindowSeconds
	if est.Fresh == 0 {
		economy.EstimatedSeconds = seconds
	}
	if l.Price == nil {
		return standard, economy
	}
	for _, t := range []struct {
		into  *wire.TierEstimate
		batch bool
	}{{&standard, false}, {&economy, true}} {
		if perCallUSD, ok := l.Price(l.Model, promptTokens, completionTokens, t.batch); ok {
			cost := math.Round(perCallUSD*float64(est.Fresh)*1e6) / 1e6 // to the micro-dollar: a small list costs fractions of a cent
			t.into.EstimatedCostUSD = &cost
		}
	}
	return standard, economy
}

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

// cachedSeconds is what a known or cached domain costs a list: its look-ups
// and its write, about 2 ms (docs/BENCHMARKS.md, cached row).
const cachedSeconds = 0.002

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
func (s *Server) listResults(c *gin.Context) {
	id, ok := s.listID(c)
	if !ok {
		return
	}
	q := c.Request.URL.Query()
	after, err := intParam(q, "after")
	if err != nil {
		s.writeError(c, err)
		return
	}
	statuses, err := statusParam(q)
	if err != nil {
		s.writeError(c, err)
		return
	}
	format, ok := negotiateResults(c.GetHeader("Accept"))
	if !ok {
		writeProblem(c, http.StatusNotAcceptable, "not-acceptable",
			"Results come as text/csv or application/x-ndjson; send one of them in Accept.", nil)
		return
	}
	extendDeadlines(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), listTimeout)
	defer cancel()
	l, err := db.ListGetOfCaller(ctx, s.cfg.DB.Pool, id, callerOf(c).Name)
	if err != nil {
		s.writeListError(c, err)
		return
	}

	c.Header("Content-Type", string(format)+"; charset=utf-8")
	c.Status(http.StatusOK)
	out := bufio.NewWriterSize(c.Writer, 64<<10)
	var write func(*classifier.ListRow) error
	if format == formatCSV {
		cw := csv.NewWriter(out)
		_ = cw.Write(wire.ListRowColumns)
		var fields []string
		write = func(r *classifier.ListRow) error {
			row := wire.NewListRow(r)
			fields = row.CSV(fields[:0])
			return cw.Write(fields)
		}
		defer cw.Flush()
	} else {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		write = func(r *classifier.ListRow) error { return enc.Encode(wire.NewListRow(r)) }
	}
	err = db.ListResults(ctx, s.cfg.DB.Pool, db.ListResultsParams{ListID: id, After: after, Statuses: statuses,
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
	tx, err := db.Begin(ctx, s.cfg.DB.Pool)
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
				s.writeError(c, fmt.Errorf("error enqueueing the list's webhook: %w", err))
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
		return fmt.Errorf("error listing the list's %s jobs: %w", kind, err)
	}
	for _, j := range res.Jobs {
		if err := do(j.ID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("error %s %d: %w", doing, j.ID, err)
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

func intParam(q map[string][]string, name string) (int, error) {
	vs := q[name]
	if len(vs) == 0 || vs[0] == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(vs[0])
	if err != nil || n < 0 {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be a row number (0 or more), not %q.", name, vs[0])}
	}
	return n, nil
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
			ok := false
			for _, known := range rowStatuses {
				ok = ok || st == known
			}
			if !ok {
				return nil, &problem{status: http.StatusBadRequest, slug: "invalid-query",
					detail: fmt.Sprintf("status %q is not one of PENDING, COMPLETED, FAILED, REJECTED, CANCELLED.", s)}
			}
			out = append(out, st)
		}
	}
	return out, nil
}
