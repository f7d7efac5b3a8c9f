// Package client is the Go client of the domainclass HTTP API: the one a
// caller in Go imports (github.com/domainclass/domainclass/client), and the
// one `domainclass submit` and `domainclass lists` are built on.
//
// It does what a caller would otherwise write again: it retries with the
// same Idempotency-Key when the network fails or the API asks to wait (429,
// 503), rides out an API that is down while waiting for work to end, says
// at once when there is no API at BaseURL at all (UnreachableError),
// uploads lists gzipped, streams a list's results to a writer, and turns
// every error answer into a *ProblemError carrying the RFC 9457 problem.
//
// The client that oapi-codegen generates from /openapi.yaml
// (internal/openapiclient) is only the test's proof that the document
// generates a working client; docs/api.md says how to generate one for
// another language.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/wire"
)

// Client calls one domainclass API with one caller's key.
type Client struct {
	// BaseURL is the API's address, such as http://127.0.0.1:8080.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; "" sends none (an
	// API with AUTH=off).
	APIKey string
	// HTTP sends the requests; nil is a client with a 30 s timeout, and for
	// a list's upload and results (which take as long as the list is big)
	// one without, that gives up on an answer silent for minutes.
	HTTP *http.Client
	// RetryFor bounds how long one call keeps retrying; 0 is 5 minutes.
	RetryFor time.Duration
	// OnRetry, when set, is told why a call is retried and after how long.
	OnRetry func(reason string, wait time.Duration)

	// reached is set once a request of this client got a connection to
	// BaseURL: from then on, a connection refused is a restart of the API
	// and is retried, and before it, there is no API to wait for.
	reached atomic.Bool
}

// New returns a client of the API at baseURL.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey}
}

// ProblemError is an error answer of the API: its HTTP status and its RFC
// 9457 problem document.
type ProblemError struct {
	StatusCode int
	Status     string // "422 Unprocessable Entity"
	Problem    wire.Problem
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
}

// Error is the status, the detail (or title) and every rejected input.
func (e *ProblemError) Error() string {
	msg := e.Problem.Detail
	if msg == "" {
		msg = e.Problem.Title
	}
	for _, it := range e.Problem.Errors {
		if it.Row > 0 {
			msg += fmt.Sprintf("; row %d", it.Row)
		} else {
			msg += ";"
		}
		msg += fmt.Sprintf(" %q: %s", it.Input, it.Reason)
	}
	return e.Status + ": " + msg
}

// UnreachableError is a call whose request never reached the API, made
// before any request of the client did: no connection to BaseURL could be
// made (refused, no such host, no connection within connectTimeout). It is
// not retried: nothing was sent, and nothing at that address is likely to
// answer in the next minutes. Once the client has reached the API, a
// connection refused is retried as the API restarting.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no service at %s (%s)", e.URL, connectCause(e.Err))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// connectCause says in a few words why a connection could not be made.
func connectCause(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "no such host " + dnsErr.Name
	case errors.Is(err, errNoConnection):
		return errNoConnection.Error()
	}
	return unwrapURLError(err).Error()
}

// RetriesExhaustedError is a call given up after RetryFor of retries: the
// API was unavailable (503, 429) or unreachable all along.
type RetriesExhaustedError struct {
	After  time.Duration
	Reason string // the last one
}

func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("gave up after %s of retries: %s", e.After, e.Reason)
}

// Classify submits a job. It sends idempotencyKey (give each job its own:
// retries and replays of the same job then never make a second one) and
// retries with it, for up to RetryFor, when the network fails or the API
// asks to wait (429, 503, and 409 while a first try is still in flight).
// Other error answers come back as *ProblemError at once.
func (c *Client) Classify(ctx context.Context, req wire.ClassifyRequest, idempotencyKey string) (*wire.Accepted, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if idempotencyKey != "" {
		header.Set("Idempotency-Key", strconv.Quote(idempotencyKey))
	}
	var a wire.Accepted
	err = c.do(ctx, http.MethodPost, "/domains/classify", header, body, http.StatusAccepted, &a,
		http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusConflict)
	if err != nil {
		return nil, err
	}
	if a.JobID == "" {
		return nil, errors.New("unexpected 202 answer: no job_id")
	}
	return &a, nil
}

// Job returns job id as it stands. It retries while the API is unavailable
// (503) or unreachable.
func (c *Client) Job(ctx context.Context, id string) (*wire.JobReport, error) {
	var rep wire.JobReport
	if err := c.do(ctx, http.MethodGet, "/domains/classify/"+url.PathEscape(id), nil, nil, http.StatusOK, &rep,
		http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &rep, nil
}

// do sends a request until it gets want (decoded into out), an answer that
// is not in retryOn (a *ProblemError), or RetryFor has passed.
func (c *Client) do(ctx context.Context, method, path string, header http.Header, body []byte, want int, out any, retryOn ...int) error {
	return c.send(ctx, &exchange{method: method, path: path, header: header, payload: body, want: want,
		read: c.readJSON(out), retryOn: retryOn})
}

func problemError(resp *http.Response, body []byte) *ProblemError {
	e := &ProblemError{StatusCode: resp.StatusCode, Status: resp.Status}
	if err := json.Unmarshal(body, &e.Problem); err != nil || (e.Problem.Title == "" && e.Problem.Detail == "") {
		e.Problem = wire.Problem{Status: resp.StatusCode, Title: strings.TrimSpace(fmt.Sprintf("%.200s", body))}
	}
	if d, ok := netguard.ParseRetryAfter(resp.Header, time.Now()); ok {
		e.RetryAfter = d
	}
	return e
}

// unwrapURLError drops *url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Wait polls the jobs every interval until all have ended, and returns
// their reports in the order of ids. After each round it calls progress,
// when set, with the reports so far. A job that has ended is not asked
// about again.
func (c *Client) Wait(ctx context.Context, ids []string, every time.Duration, progress func([]*wire.JobReport)) ([]*wire.JobReport, error) {
	reports := make([]*wire.JobReport, len(ids))
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		ended := 0
		for i, id := range ids {
			if reports[i] == nil || !reports[i].Ended() {
				rep, err := c.Job(ctx, id)
				if err != nil {
					return reports, err
				}
				reports[i] = rep
			}
			if reports[i].Ended() {
				ended++
			}
		}
		if progress != nil {
			progress(reports)
		}
		if ended == len(ids) {
			return reports, nil
		}
		select {
		case <-ctx.Done():
			return reports, ctx.Err()
		case <-ticker.C:
		}
	}
}
