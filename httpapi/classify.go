package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/listfile"
	"github.com/domainclass/domainclass/wire"
)

type classifyRequest struct {
	Classifier *string  `json:"classifier"`
	Domains    []string `json:"domains"`
	MaxAge     *string  `json:"max_age"`
	Refresh    *bool    `json:"refresh"`
}

// classifyCreate handles POST /domains/classify: it validates the request,
// then writes the job and its River job in one transaction, and answers 202
// with the status URL. Nothing is written on any other answer.
func (s *Server) classifyCreate(c *gin.Context) {
	req, err := s.jobRequestOf(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.writeError(c, err)
		return
	}
	for i := range req.domains {
		req.domains[i].Input = listfile.Clip(req.domains[i].Input) // what the job keeps of an input: as a list row does
	}
	accepted := wire.Accepted{JobID: id.String(), Status: classifier.StatusPending, StatusURL: statusURL(id),
		Classifier: req.cls.Name, Domains: wire.DomainInputs(req.domains)}
	resp, _ := json.Marshal(accepted)
	if s.jobStore(c, callerOf(c), req, id, resp) {
		c.Header("Location", accepted.StatusURL)
		c.Data(http.StatusAccepted, "application/json", resp)
	}
}

// jobRequest is what a POST /domains/classify asks for.
type jobRequest struct {
	body        classifyRequest
	cls         *classifier.Classifier
	domains     []classifier.DomainInput
	maxAge      time.Duration
	idemKey     string
	callbackURL string
}

// jobRequestOf reads a POST /domains/classify's body and headers, or
// returns the problem of the first that is wrong.
func (s *Server) jobRequestOf(c *gin.Context) (req jobRequest, err error) {
	if err = jsonContentType(c.GetHeader("Content-Type")); err != nil {
		return req, err
	}
	if req.body, err = readClassifyRequest(c); err != nil {
		return req, err
	}
	name := classifier.DefaultClassifier
	if req.body.Classifier != nil {
		name = *req.body.Classifier
	}
	if req.cls, err = s.cfg.Registry.Get(name); err != nil {
		return req, err
	}
	if req.domains, err = validateDomains(req.body.Domains); err != nil {
		return req, err
	}
	if req.maxAge, err = parseMaxAge(deref(req.body.MaxAge)); err != nil {
		return req, err
	}
	if req.idemKey, err = idempotencyKey(c.GetHeader("Idempotency-Key")); err != nil {
		return req, err
	}
	req.callbackURL, err = s.callbackURL(c.GetHeader("X-Callback-URL"))
	return req, err
}

// jobStore writes job id of req in one transaction: an Idempotency-Key
// already used replays its first answer (or is refused); else, within the
// caller's rate, River's job, ours (checking the caller's queued domains)
// and the key. It reports whether the job was written; when not, it has
// answered.
func (s *Server) jobStore(c *gin.Context, caller Caller, req jobRequest, id uuid.UUID, resp []byte) bool {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.cfg.DB.Pool)
	if err != nil {
		s.writeError(c, err)
		return false
	}
	defer db.Rollback(ctx, tx)

	// 1. An Idempotency-Key already used replays its first answer.
	var key *db.IdempotencyKey
	if req.idemKey != "" {
		key = &db.IdempotencyKey{Caller: caller.Name, Key: req.idemKey, JobID: id, Response: resp,
			Fingerprint: fingerprint(req.cls.Name, req.body.Domains, req.callbackURL, req.maxAge, deref(req.body.Refresh))}
		prior, err := s.idempotencyReplay(ctx, tx, *key)
		if err != nil {
			s.writeError(c, err)
			return false
		}
		if prior != nil {
			c.Header("Idempotent-Replayed", "true")
			c.Header("Location", statusURL(prior.JobID))
			c.Data(http.StatusAccepted, "application/json", prior.Response)
			return false
		}
	}

	// 2. A job the caller's queued-domains limit can never hold is refused
	// for good (a 429 would be retried forever); then the caller's rate:
	// new jobs only (asked after the replay check), and the token goes back
	// if the job is not written.
	if err := jobFits(caller, len(req.domains)); err != nil {
		s.writeError(c, err)
		return false
	}
	reservation, err := s.admit(caller)
	if err != nil {
		s.writeError(c, err)
		return false
	}
	committed := false
	defer func() {
		if !committed {
			reservation.cancel()
		}
	}()

	// 3. River's job, then ours with its id (one statement that also checks
	// the caller's queued domains), then the key; all or nothing.
	if err := jobs.AcceptJob(ctx, tx, s.cfg.River, db.JobInsertParams{
		ID: id, Caller: caller.Name, Classifier: req.cls.Name, Domains: req.domains, CallbackURL: req.callbackURL,
		MaxQueuedDomains: caller.MaxQueuedDomains, Want: want(req.maxAge, deref(req.body.Refresh)),
	}, key); err != nil {
		s.writeError(c, err)
		return false
	}
	if err := db.Commit(ctx, tx); err != nil {
		s.writeError(c, err)
		return false
	}
	committed = true
	return true
}

func statusURL(id uuid.UUID) string { return "/domains/classify/" + id.String() }

// jsonContentType refuses a body that is not sent as application/json (with
// any parameters, such as charset) with a 415 problem. A body without a
// Content-Type is not JSON either (RFC 9110: it may be taken as
// application/octet-stream), and neither is curl -d's form encoding. Being
// strict keeps a web page from sending a job across sites: a browser sends
// text/plain, a form or a body without a type from any page without asking
// first, but sends JSON only once the API allowed it (CORS), which it never
// does.
func jsonContentType(contentType string) error {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil && mt == "application/json" {
		return nil
	}
	sent := fmt.Sprintf("%q", contentType)
	if strings.TrimSpace(contentType) == "" {
		sent = "missing"
	}
	return &problem{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
		detail: fmt.Sprintf("Send the job as JSON with Content-Type: application/json (curl: --json, or -d with "+
			"-H 'Content-Type: application/json'); this request's Content-Type is %s.", sent)}
}

// readClassifyRequest reads the body: at most MaxBodyBytes of one JSON
// object with the right types.
func readClassifyRequest(c *gin.Context) (classifyRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			return classifyRequest{}, &problem{status: http.StatusRequestEntityTooLarge, slug: "body-too-large",
				detail: fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes)}
		}
		return classifyRequest{}, invalidJSON("The request body could not be read.")
	}
	return decodeClassifyRequest(body)
}

// parseMaxAge reads max_age, a Go duration of a second or more ("720h",
// "90m"); "" is none.
func parseMaxAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-max-age",
			detail: fmt.Sprintf("max_age must be a duration of a second or more, such as \"720h\" or \"90m\", not %q.", classifier.Truncate(s, 40))}
	}
	return d, nil
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// want is what a request accepts as a cached answer: no older than
// maxAge, and with refresh made after now (by this request, or by another
// that asked meanwhile).
func want(maxAge time.Duration, refresh bool) classifier.Want {
	w := classifier.Want{MaxAge: maxAge}
	if refresh {
		w.Since = time.Now()
	}
	return w
}

func invalidJSON(detail string) error {
	return &problem{status: http.StatusBadRequest, slug: "invalid-json", detail: detail}
}

// idempotencyReplay takes the lock of the request's key for the rest of
// tx and returns the key's first use when it is a replay of the same
// request, nil for a key not used yet (or expired), a 409 problem while a
// request with the key is in flight, and a 422 problem when the key was
// used with another request.
func (s *Server) idempotencyReplay(ctx context.Context, tx pgx.Tx, k db.IdempotencyKey) (*db.IdempotencyKey, error) {
	locked, err := db.IdempotencyKeyLock(ctx, tx, k.Caller, k.Key)
	if err != nil {
		return nil, err
	}
	if !locked {
		return nil, &problem{status: http.StatusConflict, slug: "idempotency-key-in-flight",
			detail: "A request with this Idempotency-Key is still being processed; retry later."}
	}
	prior, err := db.IdempotencyKeyGet(ctx, tx, k.Caller, k.Key)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !bytes.Equal(prior.Fingerprint, k.Fingerprint):
		return nil, &problem{status: http.StatusUnprocessableEntity, slug: "idempotency-key-reused",
			detail: "This Idempotency-Key was already used with a different request."}
	}
	return prior, nil
}

// admit takes one of the caller's jobs-per-minute, or returns a 429
// problem saying when the next one is due.
func (s *Server) admit(caller Caller) (rateToken, error) {
	r, ok, wait := s.limiter.reserve(caller.Name, caller.RatePerMinute)
	if !ok {
		return rateToken{}, &problem{status: http.StatusTooManyRequests, slug: "rate-limited", retryAfter: wait,
			detail: fmt.Sprintf("You may send %d jobs a minute; retry after the number of seconds in Retry-After.", caller.RatePerMinute)}
	}
	return r, nil
}

// jobFits refuses a job of more distinct domains than caller may have
// queued at all: 422, without Retry-After, since no wait makes it fit.
func jobFits(caller Caller, domains int) error {
	if caller.MaxQueuedDomains <= 0 || domains <= caller.MaxQueuedDomains {
		return nil
	}
	return &problem{status: http.StatusUnprocessableEntity, slug: "job-exceeds-queue-limit",
		detail: fmt.Sprintf("The job has %d distinct domains; your key may have at most %d domains queued at once, so it can never be accepted. "+
			"Send at most %d domains per job, or ask an operator to raise your limit (apikey limits --max-queued-domains).",
			domains, caller.MaxQueuedDomains, caller.MaxQueuedDomains)}
}

// decodeClassifyRequest reads the body as one JSON object with the right
// types.
func decodeClassifyRequest(body []byte) (classifyRequest, error) {
	var req classifyRequest
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return req, invalidJSON("The request body is empty; send a JSON object such as {\"domains\": [\"example.com\"]}.")
	}
	if trimmed[0] != '{' {
		return req, invalidJSON("The request body must be a JSON object.")
	}
	if err := checkKeys(trimmed, "classifier", "domains", "max_age", "refresh"); err != nil {
		return req, err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return req, invalidJSON(fmt.Sprintf("The field %q has the wrong type: want %s.", typeErr.Field, wantType(typeErr.Field)))
		}
		return req, invalidJSON(fmt.Sprintf("The request body is not valid JSON: %v.", err))
	}
	if dec.More() {
		return req, invalidJSON("The request body has data after the JSON object.")
	}
	return req, nil
}

// checkKeys refuses an object's keys that are not exactly one of fields,
// or that appear twice. encoding/json matches "DOMAINS" to "domains" and
// lets the last of two win, so a proxy, a log or a reviewer reading the
// body could see other domains than the job gets; and a misspelt optional
// field would be dropped without a word. Malformed JSON is left to Decode,
// which says where.
func checkKeys(body []byte, fields ...string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		if !slices.Contains(fields, key) {
			return invalidJSON(fmt.Sprintf("The field %q is not known; the fields are %q.", key, fields))
		}
		if seen[key] {
			return invalidJSON(fmt.Sprintf("The field %q appears twice.", key))
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

func wantType(field string) string {
	switch {
	case strings.HasPrefix(field, "domains"):
		return "an array of strings"
	case field == "classifier", field == "max_age":
		return "a string"
	case field == "refresh":
		return "true or false"
	}
	return "another type"
}

// validateDomains normalizes the inputs and returns the distinct domains, or
// a 422 problem listing every input that was rejected.
func validateDomains(inputs []string) ([]classifier.DomainInput, error) {
	if len(inputs) == 0 {
		return nil, &problem{status: http.StatusUnprocessableEntity, slug: "no-domains",
			detail: "The request has no domains; send at least one in \"domains\"."}
	}
	domains, bad := classifier.NormalizeDomains(inputs)
	if len(bad) > 0 {
		return nil, &problem{status: http.StatusUnprocessableEntity, slug: "invalid-domains", items: wire.ItemErrors(bad),
			detail: fmt.Sprintf("%d of %d domains could not be read; see errors.", len(bad), len(inputs))}
	}
	if len(domains) > wire.MaxDomainsPerJob {
		return nil, &problem{status: http.StatusUnprocessableEntity, slug: "too-many-domains",
			detail: fmt.Sprintf("The request has %d distinct domains; the limit is %d per job. Split it into several requests.",
				len(domains), wire.MaxDomainsPerJob)}
	}
	return domains, nil
}

// idempotencyKey reads an Idempotency-Key header: an RFC 8941 string
// ("quoted") or, leniently, a bare token; 1–255 printable ASCII characters.
func idempotencyKey(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", nil
	}
	if len(h) >= 2 && h[0] == '"' && h[len(h)-1] == '"' {
		h = h[1 : len(h)-1]
	}
	invalid := func(detail string) error {
		return &problem{status: http.StatusBadRequest, slug: "invalid-idempotency-key", detail: detail}
	}
	if h == "" || len(h) > 255 {
		return "", invalid("The Idempotency-Key must be 1 to 255 characters.")
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x20 || h[i] > 0x7e || h[i] == '"' || h[i] == '\\' {
			return "", invalid("The Idempotency-Key must be printable ASCII without quotes or backslashes.")
		}
	}
	return h, nil
}

// fingerprint identifies a request for Idempotency-Key: the same classifier,
// the same inputs in the same order and the same callback.
func fingerprint(classifierName string, inputs []string, callbackURL string, maxAge time.Duration, refresh bool) []byte {
	h := sha256.New()
	fields := []any{classifierName, inputs, callbackURL}
	if maxAge > 0 || refresh { // keys used before max_age and refresh keep their fingerprints
		fields = append(fields, maxAge, refresh)
	}
	b, _ := json.Marshal(fields)
	h.Write(b)
	return h.Sum(nil)
}

// classifyGet handles GET /domains/classify/{job_id}: the job, its progress
// and every domain's answer so far. Another caller's job is 404.
func (s *Server) classifyGet(c *gin.Context) {
	id, err := uuid.Parse(c.Param("job_id"))
	if err != nil {
		writeProblem(c, http.StatusBadRequest, "invalid-job-id", "The job id must be a UUID.", nil)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	job, err := db.JobGetOfCaller(ctx, s.cfg.DB.Pool, id, callerOf(c).Name)
	if errors.Is(err, db.ErrNotFound) {
		writeProblem(c, http.StatusNotFound, "not-found", "No job with this id.", nil)
		return
	} else if err != nil {
		s.writeError(c, err)
		return
	}
	body, _ := json.Marshal(wire.NewJobReport(job, s.cfg.Registry.AnswerField(job.Classifier)))
	c.Data(http.StatusOK, "application/json", body)
}
