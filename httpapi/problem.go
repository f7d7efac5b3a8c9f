package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/listfile"
	"github.com/domainclass/domainclass/wire"
)

// problemTypes are the problem types this API returns: slug → title. Each
// is documented at /problems/{slug} and in docs/api.md, "Errors".
var problemTypes = map[string]string{
	"invalid-json":              "Request body is not valid JSON",
	"body-too-large":            "Request body too large",
	"unknown-classifier":        "Unknown classifier",
	"no-domains":                "No domains",
	"invalid-domains":           "Invalid domains",
	"too-many-domains":          "Too many domains",
	"invalid-callback-url":      "Invalid callback URL",
	"webhooks-not-configured":   "Webhooks are not configured",
	"invalid-idempotency-key":   "Invalid Idempotency-Key",
	"idempotency-key-reused":    "Idempotency-Key reused with a different request",
	"idempotency-key-in-flight": "Request with this Idempotency-Key in progress",
	"invalid-job-id":            "Invalid job id",
	"not-found":                 "Not found",
	"method-not-allowed":        "Method not allowed",
	"unauthorized":              "Unauthorized",
	"cross-origin":              "Cross-origin request refused",
	"rate-limited":              "Too many requests",
	"too-many-queued":           "Too many domains queued",
	"job-exceeds-queue-limit":   "Job larger than the queued-domains limit",
	"unsupported-media-type":    "Unsupported media type",
	"list-too-large":            "List too large",
	"unreadable-list":           "List body cannot be read",
	"no-domain-column":          "CSV has no domain column",
	"no-ref-column":             "CSV has no such ref column",
	"csv-record-too-large":      "CSV row too large",
	"too-many-uploads":          "Too many uploads in progress",
	"upload-too-slow":           "Upload too slow",
	"too-many-downloads":        "Too many downloads in progress",
	"invalid-query":             "Invalid query parameter",
	"no-valid-rows":             "No valid rows",
	"too-many-lists":            "Too many active lists",
	"budget-exceeded":           "Daily model budget exceeded",
	"list-exceeds-budget":       "List larger than the daily model budget",
	"too-many-stored-rows":      "Too many list rows stored",
	"list-cancelled":            "List was cancelled",
	"invalid-list-id":           "Invalid list id",
	"already-reviewed":          "Review item already reviewed",
	"override-changed":          "Override changed since the verdict",
	"not-acceptable":            "Results format not acceptable",
	"unavailable":               "Service unavailable",
	"internal":                  "Internal error",
}

// listStatus is the status of each reason a list upload is refused.
var listStatus = map[listfile.Code]int{
	listfile.CodeTooLarge:       http.StatusRequestEntityTooLarge,
	listfile.CodeRecordTooLarge: http.StatusRequestEntityTooLarge,
	listfile.CodeUnreadable:     http.StatusBadRequest,
	listfile.CodeNoDomainColumn: http.StatusBadRequest,
	listfile.CodeNoRefColumn:    http.StatusBadRequest,
}

// statusClientClosed is what a request whose caller hung up is counted as.
const statusClientClosed = 499

// problem is an error as the caller sees it: a status, a problem type, a
// sentence saying what to do, the rejected inputs, and when to try again.
type problem struct {
	status     int
	slug       string
	detail     string
	items      []wire.ItemError
	retryAfter time.Duration
}

func (p *problem) Error() string { return fmt.Sprintf("%d %s: %s", p.status, p.slug, p.detail) }

// unavailableRetryAfter is what a 503 tells clients: Postgres restarts in
// seconds, and the pool reconnects on the next request.
const unavailableRetryAfter = 2 * time.Second

// queuedRetryAfter is the Retry-After of a refusal for too many queued
// domains: jobs of ten domains finish in seconds, so look again soon.
const queuedRetryAfter = 10 * time.Second

// problemOf maps an error from any layer to what the caller sees, in one
// place. ok is false for an error nobody expected (a bug, an unexpected
// failure): it becomes a 500 whose details stay in the log.
func problemOf(err error) (p *problem, ok bool) {
	var (
		queueFull *db.QueueFullError
		unknown   *classifier.UnknownClassifierError
		list      *listfile.Error
	)
	if p, ok := admissionProblem(err); ok {
		return p, true
	}
	switch {
	case errors.As(err, &p): // a body's own (too slow, too large) before the list's that wraps it
		return p, true
	case errors.As(err, &list):
		return &problem{status: listStatus[list.Code], slug: string(list.Code), detail: list.Detail}, true
	case errors.Is(err, db.ErrUnavailable),
		// A request's deadlines are its database bounds: one that passed
		// (in River's insert too) means "busy or down", not a bug.
		errors.Is(err, context.DeadlineExceeded):
		return &problem{status: http.StatusServiceUnavailable, slug: "unavailable",
			detail: "The database is unavailable; try again shortly.", retryAfter: unavailableRetryAfter}, true
	case errors.As(err, &queueFull):
		atLeast := ""
		if queueFull.Queued == queueFull.Limit {
			atLeast = "at least "
		}
		return &problem{status: http.StatusTooManyRequests, slug: "too-many-queued", retryAfter: queuedRetryAfter,
			detail: fmt.Sprintf("You have %s%d domains queued and not yet answered; the limit is %d. "+
				"Wait for your jobs to finish, then send more.", atLeast, queueFull.Queued, queueFull.Limit)}, true
	case errors.As(err, &unknown):
		return &problem{status: http.StatusUnprocessableEntity, slug: "unknown-classifier", detail: unknown.Error()}, true
	case errors.Is(err, jobs.ErrListCancelled):
		return &problem{status: http.StatusConflict, slug: "list-cancelled",
			detail: "A cancelled list is not resumed. Send its rows again as a new list: the answers it got are cached."}, true
	}
	return &problem{status: http.StatusInternalServerError, slug: "internal", detail: "Internal error."}, false
}

// writeError answers with err's problem. Unexpected errors are logged here,
// once, and shown as "Internal error."; their details never reach the
// caller.
func (s *Server) writeError(c *gin.Context, err error) {
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		// The caller hung up: nobody reads an answer, and it is not our
		// fault. 499 is nginx's "client closed request", for the metrics.
		s.cfg.Logger.InfoContext(c.Request.Context(), "client closed the request", "method", c.Request.Method,
			"route", c.FullPath())
		c.AbortWithStatus(statusClientClosed)
		return
	}
	p, ok := problemOf(err)
	switch {
	case !ok:
		s.cfg.Logger.ErrorContext(c.Request.Context(), "internal error", "method", c.Request.Method,
			"route", c.FullPath(), "error", err)
	case p.status == http.StatusServiceUnavailable:
		s.cfg.Logger.WarnContext(c.Request.Context(), "dependency unavailable", "route", c.FullPath(), "error", err)
	case p.status == http.StatusUnauthorized:
		c.Header("WWW-Authenticate", `Bearer realm="domainclass"`)
	}
	if p.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(p.retryAfter)))
	}
	writeProblem(c, p.status, p.slug, p.detail, p.items)
}

// writeProblem writes an application/problem+json response and aborts.
func writeProblem(c *gin.Context, status int, slug, detail string, items []wire.ItemError) {
	title, ok := problemTypes[slug]
	if !ok {
		title = http.StatusText(status)
	}
	body, _ := json.Marshal(wire.Problem{Type: "/problems/" + slug, Title: title, Status: status, Detail: detail,
		Errors: items})
	c.Abort()
	c.Data(status, "application/problem+json", body)
}

// problemDoc serves GET /problems/{slug}: what each problem type means.
func problemDoc(c *gin.Context) {
	slug := c.Param("slug")
	title, ok := problemTypes[slug]
	if !ok {
		writeProblem(c, http.StatusNotFound, "not-found", "No such problem type.", nil)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(title+
		"\n\nSee docs/api.md, section \"Errors\", for when this is returned and what to do.\n"))
}
