package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// connectTimeout bounds the wait for a first connection to the API: a
// host that drops the packets would otherwise hold the call for the
// dialer's 30 s and then, like a refusal, for the retries'.
const connectTimeout = 10 * time.Second

var errNoConnection = fmt.Errorf("no connection within %s", connectTimeout)

// exchange is one call of the API, made again on each attempt.
type exchange struct {
	method, path string
	header       http.Header
	// payload is the body of a short request; open, when set, is instead
	// called on each attempt for a body of unknown length (a list).
	payload []byte
	open    func() (io.ReadCloser, error)
	want    int
	// read reads an answer with status want. A reason retries the call (the
	// answer could not be read whole and nothing was done with it); an
	// error ends it.
	read    func(*http.Response) (reason string, err error)
	retryOn []int
	// stream is set for a call whose body or answer may take longer than
	// the short calls' timeout (lists): no overall timeout, and an answer's
	// body that stops arriving for streamIdle ends the call.
	stream bool
}

// send makes x until its answer is x.want (read by x.read), an answer that
// is not in x.retryOn (a *ProblemError), or RetryFor has passed.
func (c *Client) send(ctx context.Context, x *exchange) error {
	deadline := time.Now().Add(c.retryFor())
	for attempt := 1; ; attempt++ {
		wait, reason, err := c.once(ctx, x)
		if err != nil || reason == "" {
			return err
		}
		if wait <= 0 {
			wait = time.Duration(attempt) * time.Second
		}
		if time.Now().Add(wait).After(deadline) {
			return &RetriesExhaustedError{After: c.retryFor(), Reason: reason}
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
func (c *Client) once(ctx context.Context, x *exchange) (wait time.Duration, reason string, err error) {
	var body io.Reader = bytes.NewReader(x.payload)
	if x.open != nil {
		rc, err := x.open()
		if err != nil {
			return 0, "", err
		}
		body = rc
	}
	reqCtx := ctx
	// Whether this request got a connection: one that did may have reached
	// the API (and is retried with its Idempotency-Key); one that did not,
	// before any request of the client did, finds no API there.
	var connected atomic.Bool
	first := !c.reached.Load()
	if first {
		var cancel context.CancelCauseFunc
		reqCtx, cancel = context.WithCancelCause(reqCtx)
		defer cancel(nil)
		noConn := time.AfterFunc(connectTimeout, func() { cancel(errNoConnection) })
		defer noConn.Stop()
		reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
			noConn.Stop()
			connected.Store(true)
			c.reached.Store(true)
		}})
	}
	var stall *time.Timer
	if x.stream {
		var cancel context.CancelCauseFunc
		reqCtx, cancel = context.WithCancelCause(reqCtx)
		defer cancel(nil)
		stall = time.AfterFunc(streamIdle, func() { cancel(errStalled) })
		stall.Stop() // runs only while the answer's body is awaited
		defer stall.Stop()
	}
	req, err := c.newRequest(reqCtx, x, body)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.httpClientFor(x).Do(req)
	if err != nil {
		if src, ok := body.(interface{ sourceErr() error }); ok && src.sourceErr() != nil {
			return 0, "", src.sourceErr() // the caller's data, not the network: a retry cannot help
		}
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		if first && !connected.Load() {
			if cause := context.Cause(reqCtx); errors.Is(cause, errNoConnection) {
				err = cause
			}
			return 0, "", &UnreachableError{URL: c.BaseURL, Err: err}
		}
		return 0, fmt.Sprintf("cannot reach %s (%v)", c.BaseURL, unwrapURLError(err)), nil
	}
	defer resp.Body.Close()
	return c.answer(ctx, reqCtx, x, resp, stall)
}

// newRequest builds exchange x's request on reqCtx, sending body (closed
// here when the request cannot be built).
func (c *Client) newRequest(reqCtx context.Context, x *exchange, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(reqCtx, x.method, c.BaseURL+x.path, body)
	if err != nil {
		if rc, ok := body.(io.Closer); ok {
			_ = rc.Close()
		}
		return nil, fmt.Errorf("invalid API URL: %w", err)
	}
	if x.open != nil {
		req.ContentLength = -1 // unknown: sent chunked
	}
	for k, v := range x.header {
		req.Header[k] = v
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	return req, nil
}

// answer reads the API's answer resp to exchange x: the one it wants is
// x's to read (a streamed one watched by stall), any other is a problem,
// retried after a wait when x retries on its status.
func (c *Client) answer(ctx, reqCtx context.Context, x *exchange, resp *http.Response, stall *time.Timer) (wait time.Duration, reason string, err error) {
	if resp.StatusCode == x.want {
		if stall != nil {
			resp.Body = &idleBody{ReadCloser: resp.Body, ctx: reqCtx, stall: stall}
		}
		reason, err := x.read(resp)
		if err != nil && ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return 0, reason, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Sprintf("error reading the answer from %s (%v)", c.BaseURL, err), nil
	}
	perr := problemError(resp, b)
	if perr.Problem.Type == "/problems/budget-exceeded" {
		return 0, "", perr // waiting until the budget refills is the caller's choice, not a retry's
	}
	for _, code := range x.retryOn {
		if resp.StatusCode == code {
			return perr.RetryAfter, perr.Error(), nil
		}
	}
	return 0, "", perr
}

// streamIdle is how long the body of a streamed answer may send nothing
// before the call gives up on it: the API writes a list's results without
// pauses, so two minutes of silence is a dead connection.
const streamIdle = 2 * time.Minute

var errStalled = fmt.Errorf("no data from the API for %s", streamIdle)

// idleBody is an answer's body that ends its request when nothing arrives
// for streamIdle.
type idleBody struct {
	io.ReadCloser
	ctx   context.Context
	stall *time.Timer
}

// Read counts only the time spent waiting in it: a slow writer of what was
// read is not a silent API.
func (b *idleBody) Read(p []byte) (int, error) {
	b.stall.Reset(streamIdle)
	n, err := b.ReadCloser.Read(p)
	b.stall.Stop()
	if err != nil && context.Cause(b.ctx) == errStalled {
		return n, errStalled
	}
	return n, err
}

// readJSON reads a JSON answer into out.
func (c *Client) readJSON(out any) func(*http.Response) (string, error) {
	return func(resp *http.Response) (string, error) {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return fmt.Sprintf("error reading the answer from %s (%v)", c.BaseURL, err), nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return "", fmt.Errorf("unreadable %s answer: %w", resp.Status, err)
		}
		return "", nil
	}
}

// httpClientFor is c.HTTP, or the default for x: a 30 s timeout for a short
// call; for a list's upload or results, none (they take as long as the
// list is big) but a bound on the wait for the answer's header.
func (c *Client) httpClientFor(x *exchange) *http.Client {
	switch {
	case c.HTTP != nil:
		return c.HTTP
	case x.stream:
		return streamHTTP
	}
	return defaultHTTP
}

var (
	defaultHTTP = &http.Client{Timeout: 30 * time.Second}
	streamHTTP  = &http.Client{Transport: streamTransport()}
)

// streamTransport is Go's default transport (its dial and TLS timeouts,
// and Expect: 100-continue after 1 s) that waits at most 10 minutes for an
// answer's header once the body is sent: the API commits a list of a
// million rows in seconds.
func streamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 10 * time.Minute
	return t
}

func (c *Client) retryFor() time.Duration {
	if c.RetryFor > 0 {
		return c.RetryFor
	}
	return 5 * time.Minute
}
