package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
)

// Problem is an RFC 9457 problem details document.
type Problem struct {
	Type   string                 `json:"type"`
	Title  string                 `json:"title"`
	Status int                    `json:"status"`
	Detail string                 `json:"detail,omitempty"`
	Errors []classifier.ItemError `json:"errors,omitempty"`
}

// problemTypes are the problem types this API returns: slug → title. Each
// is documented at /problems/{slug} (README, "Errors").
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
	"rate-limited":              "Too many requests",
	"too-many-queued":           "Too many domains queued",
	"unavailable":               "Service unavailable",
	"internal":                  "Internal error",
	"validation":                "Invalid request",
}

// codeStatus maps classifier error codes to HTTP statuses, in one place.
var codeStatus = map[string]int{
	classifier.EINVALID:      http.StatusUnprocessableEntity,
	classifier.ENOTFOUND:     http.StatusNotFound,
	classifier.ECONFLICT:     http.StatusConflict,
	classifier.EUNAUTHORIZED: http.StatusUnauthorized,
	classifier.EUNAVAILABLE:  http.StatusServiceUnavailable,
	classifier.ETOOMANY:      http.StatusTooManyRequests,
	classifier.EINTERNAL:     http.StatusInternalServerError,
}

var codeSlug = map[string]string{
	classifier.EINVALID:      "validation",
	classifier.ENOTFOUND:     "not-found",
	classifier.ECONFLICT:     "idempotency-key-in-flight",
	classifier.EUNAUTHORIZED: "unauthorized",
	classifier.EUNAVAILABLE:  "unavailable",
	classifier.ETOOMANY:      "rate-limited",
	classifier.EINTERNAL:     "internal",
}

// unavailableRetryAfter is what a 503 tells clients: Postgres restarts in
// seconds, and the pool reconnects on the next request.
const unavailableRetryAfter = 2

// writeError writes err as a problem. Internal errors are logged here, once,
// and shown as "Internal error."; their details never reach the caller.
func writeError(c *gin.Context, logger *slog.Logger, err error) {
	code := classifier.ErrorCode(err)
	status, ok := codeStatus[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	var appErr *classifier.Error
	slug := codeSlug[code]
	var items []classifier.ItemError
	if errors.As(err, &appErr) {
		if appErr.Type != "" {
			slug = appErr.Type
		}
		items = appErr.Items
	}
	switch code {
	case classifier.EINTERNAL, "":
		logger.ErrorContext(c.Request.Context(), "internal error", "method", c.Request.Method,
			"route", c.FullPath(), "error", err)
		slug = "internal"
	case classifier.EUNAVAILABLE:
		logger.WarnContext(c.Request.Context(), "dependency unavailable", "route", c.FullPath(), "error", err)
		c.Header("Retry-After", strconv.Itoa(unavailableRetryAfter))
	case classifier.EUNAUTHORIZED:
		c.Header("WWW-Authenticate", `Bearer realm="domainclass"`)
	}
	if appErr != nil && appErr.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(retryAfterSeconds(appErr.RetryAfter)))
	}
	writeProblem(c, status, slug, classifier.ErrorMessage(err), items)
}

// writeProblem writes an application/problem+json response and aborts.
func writeProblem(c *gin.Context, status int, slug, detail string, items []classifier.ItemError) {
	title, ok := problemTypes[slug]
	if !ok {
		title = http.StatusText(status)
	}
	body, _ := json.Marshal(Problem{Type: "/problems/" + slug, Title: title, Status: status, Detail: detail, Errors: items})
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
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(title+"\n\nSee the README, section \"Errors\", for when this is returned and what to do.\n"))
}
