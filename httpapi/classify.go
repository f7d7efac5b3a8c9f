package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

type classifyRequest struct {
	Classifier *string  `json:"classifier"`
	Domains    []string `json:"domains"`
}

type acceptedResponse struct {
	JobID      string                   `json:"job_id"`
	Status     classifier.Status        `json:"status"`
	StatusURL  string                   `json:"status_url"`
	Classifier string                   `json:"classifier"`
	Domains    []classifier.DomainInput `json:"domains"`
}

// classifyCreate handles POST /domains/classify: it validates the request,
// writes the job and its River job in one transaction, and answers 202 with
// the status URL. Nothing is written on any other answer.
func (s *Server) classifyCreate(c *gin.Context) {
	caller := callerOf(c)

	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeProblem(c, http.StatusRequestEntityTooLarge, "body-too-large",
				fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes), nil)
			return
		}
		writeProblem(c, http.StatusBadRequest, "invalid-json", "The request body could not be read.", nil)
		return
	}
	req, err := decodeClassifyRequest(body)
	if err != nil {
		writeProblem(c, http.StatusBadRequest, "invalid-json", err.Error(), nil)
		return
	}

	name := classifier.DefaultClassifier
	if req.Classifier != nil {
		name = *req.Classifier
	}
	cls, err := s.cfg.Registry.Get(name)
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	domains, err := validateDomains(req.Domains)
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	idemKey, err := idempotencyKey(c.GetHeader("Idempotency-Key"))
	if err != nil {
		writeProblem(c, http.StatusBadRequest, "invalid-idempotency-key", err.Error(), nil)
		return
	}
	callbackURL, err := s.callbackURL(c.GetHeader("X-Callback-URL"))
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}

	id, err := uuid.NewV7()
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	statusURL := "/domains/classify/" + id.String()
	resp, _ := json.Marshal(acceptedResponse{
		JobID: id.String(), Status: classifier.StatusPending, StatusURL: statusURL,
		Classifier: cls.Name, Domains: domains,
	})

	// The rate limit counts new jobs only: it is asked after the replay
	// check, and its token is handed back if the job is not written.
	var reservation *rate.Reservation
	admit := func() error {
		r, ok, wait := s.limiter.reserve(caller.Name, caller.RatePerMinute)
		if !ok {
			return &classifier.Error{Code: classifier.ETOOMANY, Type: "rate-limited", RetryAfter: wait,
				Message: fmt.Sprintf("You may send %d jobs a minute; retry after the number of seconds in Retry-After.", caller.RatePerMinute)}
		}
		reservation = r
		return nil
	}

	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	res, err := s.cfg.Store.JobCreate(ctx, db.JobCreateParams{
		ID: id, Caller: caller.Name, Classifier: cls.Name, Domains: domains, CallbackURL: callbackURL,
		IdempotencyKey: idemKey, Fingerprint: fingerprint(cls.Name, req.Domains, callbackURL), Response: resp,
		MaxQueuedDomains: caller.MaxQueuedDomains, Admit: admit,
	}, jobs.EnqueueClassify(s.cfg.Inserter))
	if err != nil && reservation != nil {
		reservation.Cancel() // the job was not written
	}
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	if res.Replayed {
		resp, statusURL = res.Response, "/domains/classify/"+res.JobID.String()
		c.Header("Idempotent-Replayed", "true")
	}
	c.Header("Location", statusURL)
	c.Data(http.StatusAccepted, "application/json", resp)
}

// decodeClassifyRequest reads the body as one JSON object with the right
// types.
func decodeClassifyRequest(body []byte) (classifyRequest, error) {
	var req classifyRequest
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return req, errors.New("The request body is empty; send a JSON object such as {\"domains\": [\"example.com\"]}.")
	}
	if trimmed[0] != '{' {
		return req, errors.New("The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return req, fmt.Errorf("The field %q has the wrong type: want %s.", typeErr.Field, wantType(typeErr.Field))
		}
		return req, fmt.Errorf("The request body is not valid JSON: %v.", err)
	}
	if dec.More() {
		return req, errors.New("The request body has data after the JSON object.")
	}
	return req, nil
}

func wantType(field string) string {
	switch {
	case strings.HasPrefix(field, "domains"):
		return "an array of strings"
	case field == "classifier":
		return "a string"
	}
	return "another type"
}

// validateDomains normalizes the inputs and returns the distinct domains, or
// an EINVALID error listing every input that was rejected.
func validateDomains(inputs []string) ([]classifier.DomainInput, error) {
	if len(inputs) == 0 {
		return nil, &classifier.Error{Code: classifier.EINVALID, Type: "no-domains",
			Message: "The request has no domains; send at least one in \"domains\"."}
	}
	domains, bad := classifier.NormalizeDomains(inputs)
	if len(bad) > 0 {
		return nil, &classifier.Error{Code: classifier.EINVALID, Type: "invalid-domains", Items: bad,
			Message: fmt.Sprintf("%d of %d domains could not be read; see errors.", len(bad), len(inputs))}
	}
	if len(domains) > MaxDomains {
		return nil, &classifier.Error{Code: classifier.EINVALID, Type: "too-many-domains",
			Message: fmt.Sprintf("The request has %d distinct domains; the limit is %d per job. Split it into several requests.", len(domains), MaxDomains)}
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
	if h == "" || len(h) > 255 {
		return "", errors.New("The Idempotency-Key must be 1 to 255 characters.")
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x20 || h[i] > 0x7e || h[i] == '"' || h[i] == '\\' {
			return "", errors.New("The Idempotency-Key must be printable ASCII without quotes or backslashes.")
		}
	}
	return h, nil
}

// MaxCallbackURLBytes is the longest X-Callback-URL accepted.
const MaxCallbackURLBytes = 2048

// callbackURL reads an X-Callback-URL header: "" when there is none, else
// an absolute https URL (http too when private addresses are allowed)
// without credentials, whose host is not a literal private, loopback,
// link-local or metadata address, nor localhost, unless those are allowed.
// Names are checked again when a delivery connects. It returns an EINVALID
// error (webhooks-not-configured or invalid-callback-url) otherwise.
func (s *Server) callbackURL(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", nil
	}
	if !s.cfg.Webhooks {
		return "", &classifier.Error{Code: classifier.EINVALID, Type: "webhooks-not-configured",
			Message: "This service has no WEBHOOK_SECRET, so it cannot sign callbacks; leave out X-Callback-URL and poll the status URL."}
	}
	invalid := func(format string, args ...any) error {
		return &classifier.Error{Code: classifier.EINVALID, Type: "invalid-callback-url",
			Message: "X-Callback-URL " + fmt.Sprintf(format, args...)}
	}
	if len(h) > MaxCallbackURLBytes {
		return "", invalid("is longer than %d characters.", MaxCallbackURLBytes)
	}
	u, err := url.Parse(h)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", invalid("must be an absolute https URL, such as https://example.com/hooks/domainclass.")
	}
	if u.Scheme == "http" && !s.cfg.CallbackAllowPrivate {
		return "", invalid("must use https.")
	}
	if u.User != nil {
		return "", invalid("must not hold credentials; deliveries are authenticated by their signature.")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if err := netguard.CheckHost(host, s.cfg.CallbackAllowPrivate); err != nil {
		return "", invalid("points at a private, loopback or link-local address (%s); callbacks go to public internet addresses only.", host)
	}
	return h, nil
}

// fingerprint identifies a request for Idempotency-Key: the same classifier,
// the same inputs in the same order and the same callback.
func fingerprint(classifierName string, inputs []string, callbackURL string) []byte {
	h := sha256.New()
	b, _ := json.Marshal([]any{classifierName, inputs, callbackURL})
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
	caller := callerOf(c).Name
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	job, err := s.cfg.Store.JobGet(ctx, id, &caller)
	if classifier.ErrorCode(err) == classifier.ENOTFOUND {
		writeProblem(c, http.StatusNotFound, "not-found", "No job with this id.", nil)
		return
	} else if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	body, _ := json.Marshal(job.Report())
	c.Data(http.StatusOK, "application/json", body)
}
