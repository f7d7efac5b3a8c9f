// Package client is a Go client of the domainclass HTTP API, as a caller
// would use it: it submits jobs, polls them, and turns error answers into
// *ProblemError. `domainclass submit` is built on it; teams can import it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/domainclass/domainclass/classifier/netguard"
	"github.com/domainclass/domainclass/httpapi/wire"
)

// Client calls one domainclass API with one caller's key.
type Client struct {
	// BaseURL is the API's address, such as http://127.0.0.1:8080.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; "" sends none (an
	// API with AUTH=off).
	APIKey string
	// HTTP sends the requests; nil is a client with a 30 s timeout.
	HTTP *http.Client
	// RetryFor bounds how long one call keeps retrying; 0 is 5 minutes.
	RetryFor time.Duration
	// OnRetry, when set, is told why a call is retried and after how long.
	OnRetry func(reason string, wait time.Duration)
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
		msg += fmt.Sprintf("; %q: %s", it.Input, it.Reason)
	}
	return e.Status + ": " + msg
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
	deadline := time.Now().Add(c.retryFor())
	for attempt := 1; ; attempt++ {
		wait, reason, err := c.once(ctx, method, path, header, body, want, out, retryOn)
		if err != nil || reason == "" {
			return err
		}
		if wait <= 0 {
			wait = time.Duration(attempt) * time.Second
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("gave up after %s of retries: %s", c.retryFor(), reason)
		}
		if c.OnRetry != nil {
			c.OnRetry(reason, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// once sends one request. A non-empty reason means: retry after wait (0:
// the caller's backoff).
func (c *Client) once(ctx context.Context, method, path string, header http.Header, body []byte, want int, out any,
	retryOn []int) (wait time.Duration, reason string, err error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("invalid API URL: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return 0, fmt.Sprintf("cannot reach %s (%v)", c.BaseURL, unwrapURLError(err)), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Sprintf("error reading the answer from %s (%v)", c.BaseURL, err), nil
	}
	if resp.StatusCode == want {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, "", fmt.Errorf("unreadable %s answer: %w", resp.Status, err)
		}
		return 0, "", nil
	}
	perr := problemError(resp, b)
	for _, code := range retryOn {
		if resp.StatusCode == code {
			return perr.RetryAfter, perr.Error(), nil
		}
	}
	return 0, "", perr
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

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

func (c *Client) retryFor() time.Duration {
	if c.RetryFor > 0 {
		return c.RetryFor
	}
	return 5 * time.Minute
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
