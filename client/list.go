package client

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/domainclass/domainclass/wire"
)

// Content types of a list upload (ListOptions.ContentType).
const (
	// ListCSV is a header row with a domain column (any case) and an
	// optional ref column, kept per row and returned with its answer.
	ListCSV = "text/csv"
	// ListNDJSON is one {"domain": "...", "ref": "..."} per line.
	ListNDJSON = "application/x-ndjson"
	// ListText is one domain per line; blank lines and # comments skipped.
	ListText = "text/plain"
)

// ListOptions say how a list is sent.
type ListOptions struct {
	// Classifier is the classifier to ask; "" is the API's default (cpg).
	Classifier string
	// ContentType is the list's format: ListCSV, ListNDJSON or ListText.
	ContentType string
	// IdempotencyKey identifies this list among the caller's requests for
	// 24 hours: the same key and body return the first list again. ""
	// gives the call a random key of its own, so that its retries never
	// make a second list; give one to make repeated runs safe too.
	IdempotencyKey string
	// CallbackURL, when set, is sent as X-Callback-URL: the API POSTs a
	// signed list.completed webhook there when the list ends.
	CallbackURL string
	// Tier is "standard" (the default when "") or "economy": fresh domains
	// through the provider's Batch API, at about half the model cost,
	// within 24 hours.
	Tier string
	// DomainColumn and RefColumn name the columns of a ListCSV upload that
	// hold each row's domain and ref (any case); "" for the API's defaults
	// ("domain", and "ref" when there is one). Other columns are dropped.
	DomainColumn, RefColumn string
}

// UploadList sends a list: the body open returns, gzip-compressed as it is
// read (the list is never held in memory whole). open is called again for
// each attempt, so it must return the same data each time (a file, not a
// pipe).
//
// It sends opts.IdempotencyKey (or a random key, see ListOptions) and
// retries with it, for up to RetryFor, when the network fails or the API
// asks to wait (429, including too many active lists; 503; and 409 while a
// first try is still in flight). An error of open, or of reading what it
// returned, comes back at once and is not retried; so do other error
// answers, as *ProblemError (400 unreadable list or no domain column, 413
// too large, 415 content type, 422 unknown classifier or no valid row).
func (c *Client) UploadList(ctx context.Context, open func() (io.ReadCloser, error), opts ListOptions) (*wire.ListAccepted, error) {
	header, err := listHeader(opts)
	if err != nil {
		return nil, err
	}
	key := opts.IdempotencyKey
	if key == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		key = fmt.Sprintf("list-%x", b)
	}
	header.Set("Idempotency-Key", strconv.Quote(key))
	var a wire.ListAccepted
	err = c.send(ctx, &exchange{method: http.MethodPost, path: "/lists" + query("classifier", opts.Classifier, "tier", opts.Tier,
		"domain_column", opts.DomainColumn, "ref_column", opts.RefColumn),
		header: header, open: gzipped(open), want: http.StatusAccepted, read: c.readJSON(&a), stream: true,
		retryOn: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusConflict}})
	if err != nil {
		return nil, err
	}
	if a.ListID == "" {
		return nil, errors.New("unexpected 202 answer: no list_id")
	}
	return &a, nil
}

// EstimateList asks what a list would cost (POST /lists?dry_run=true):
// rows, domains, how many are known, cached or fresh, model calls, cost and
// time. Nothing is written. opts.IdempotencyKey and opts.CallbackURL are
// not sent. It retries while the API is unavailable (503) or unreachable,
// or busy with the caller's other uploads (429); open's errors and other
// error answers come back as for UploadList.
func (c *Client) EstimateList(ctx context.Context, open func() (io.ReadCloser, error), opts ListOptions) (*wire.ListEstimate, error) {
	opts.IdempotencyKey, opts.CallbackURL = "", ""
	header, err := listHeader(opts)
	if err != nil {
		return nil, err
	}
	var est wire.ListEstimate
	err = c.send(ctx, &exchange{method: http.MethodPost,
		path: "/lists" + query("classifier", opts.Classifier, "tier", opts.Tier, "dry_run", "true",
			"domain_column", opts.DomainColumn, "ref_column", opts.RefColumn),
		header: header, open: gzipped(open), want: http.StatusOK, read: c.readJSON(&est), stream: true,
		retryOn: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}})
	if err != nil {
		return nil, err
	}
	return &est, nil
}

func listHeader(opts ListOptions) (http.Header, error) {
	switch opts.ContentType {
	case ListCSV, ListNDJSON, ListText:
	default:
		return nil, fmt.Errorf("unsupported list content type %q: use %s, %s or %s", opts.ContentType, ListCSV, ListNDJSON, ListText)
	}
	h := http.Header{"Content-Type": {opts.ContentType}, "Content-Encoding": {"gzip"},
		"Accept": {"application/json"}, "Expect": {"100-continue"}}
	if opts.CallbackURL != "" {
		h.Set("X-Callback-URL", opts.CallbackURL)
	}
	return h, nil
}

// query is "?k=v&…" of the pairs whose value is not empty, or "".
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// List returns list id's status and progress. It retries while the API is
// unavailable (503) or unreachable; other error answers come back as
// *ProblemError (400 for an id that is not a UUID, 404 for an unknown list
// or another caller's).
func (c *Client) List(ctx context.Context, id string) (*wire.ListStatus, error) {
	var s wire.ListStatus
	if err := c.do(ctx, http.MethodGet, wire.ListStatusURL(url.PathEscape(id)), nil, nil, http.StatusOK, &s,
		http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &s, nil
}

// CancelList cancels list id (DELETE /lists/{id}) and returns its status:
// rows not yet final become CANCELLED, and no model call for the list
// starts after it returns. Cancelling a list that has ended changes
// nothing. Errors are as for List; it retries the same way (a cancel is
// safe to repeat).
func (c *Client) CancelList(ctx context.Context, id string) (*wire.ListStatus, error) {
	var s wire.ListStatus
	if err := c.do(ctx, http.MethodDelete, wire.ListStatusURL(url.PathEscape(id)), nil, nil, http.StatusOK, &s,
		http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &s, nil
}

// ResultsOptions choose what ListResults downloads.
type ResultsOptions struct {
	// NDJSON asks for one JSON object per row instead of CSV (with a
	// header row, the columns of wire.ListRowColumns for the list's
	// classifier's answer field). A CSV cell that a
	// spreadsheet would run as a formula comes escaped with an apostrophe
	// where it starts (csvcell.Unescape takes it off) unless KeepFormulas.
	NDJSON bool
	// KeepFormulas asks for the CSV's cells as stored, formulas unescaped
	// (?escape_formulas=false), for a program that reads them itself.
	KeepFormulas bool
	// Status keeps only rows with these statuses (PENDING, COMPLETED,
	// FAILED, REJECTED, CANCELLED); none keeps every row.
	Status []string
	// After starts after this row number (to resume); 0 is from the start.
	After int
}

// ListResults writes list id's rows, in upload order, to w as the API
// streams them (nothing is buffered whole) and returns how many bytes it
// wrote. Rows not yet final come as PENDING.
//
// It retries while the API is unavailable (503) or unreachable, or the
// caller has as many downloads in progress as it may (429
// too-many-downloads, after its Retry-After), until the answer starts;
// error answers come back as *ProblemError (400 bad id or query, 404
// unknown list, 406). Once the rows flow it does not retry: an
// answer cut off before its end, or silent for two minutes, is an error
// (never a short download that looks whole), as is an error writing to w;
// what was written stays written (resume with After).
func (c *Client) ListResults(ctx context.Context, id string, w io.Writer, opts ResultsOptions) (int64, error) {
	accept := "text/csv"
	if opts.NDJSON {
		accept = "application/x-ndjson"
	}
	after, keep := "", ""
	if opts.After > 0 {
		after = strconv.Itoa(opts.After)
	}
	if opts.KeepFormulas {
		keep = "false"
	}
	cw := &countingWriter{w: w}
	err := c.send(ctx, &exchange{method: http.MethodGet,
		path:   wire.ListResultsURL(url.PathEscape(id)) + query("status", strings.Join(opts.Status, ","), "after", after, "escape_formulas", keep),
		header: http.Header{"Accept": {accept}}, want: http.StatusOK, stream: true,
		retryOn: []int{http.StatusServiceUnavailable, http.StatusTooManyRequests},
		read: func(resp *http.Response) (string, error) {
			_, err := io.Copy(cw, resp.Body)
			switch {
			case cw.err != nil:
				return "", fmt.Errorf("error writing the results after %d bytes: %w", cw.n, cw.err)
			case errors.Is(err, io.ErrUnexpectedEOF):
				return "", fmt.Errorf("the results were cut off after %d bytes: the API ended the answer early", cw.n)
			case err != nil:
				return "", fmt.Errorf("the results were cut off after %d bytes: %w", cw.n, err)
			}
			return "", nil
		}})
	return cw.n, err
}

// countingWriter counts what it writes and keeps the first write error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	if err != nil && cw.err == nil {
		cw.err = err
	}
	return n, err
}

// WaitList polls list id every interval until it has ended (COMPLETED,
// CANCELLED or FAILED) and returns its last status. After each poll it
// calls progress, when set. A list runs for hours, so the wait rides out
// an API that is unavailable or unreachable for longer than one call
// retries (RetryFor): it tells OnRetry and polls on. It returns an error
// answer that waiting will not change (a *ProblemError: 404, 401…) at
// once, and ctx's error when ctx ends first; with an error, the status is
// the last one seen (nil if none).
func (c *Client) WaitList(ctx context.Context, id string, every time.Duration, progress func(*wire.ListStatus)) (*wire.ListStatus, error) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var last *wire.ListStatus
	for {
		s, err := c.List(ctx, id)
		switch {
		case err == nil:
			last = s
			if progress != nil {
				progress(s)
			}
			if s.Ended() {
				return s, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case !transient(err):
			return last, err
		case c.OnRetry != nil:
			c.OnRetry("still waiting: "+err.Error(), every)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-ticker.C:
		}
	}
}

// transient reports whether err says the API could not be asked now
// (unavailable, unreachable, a gateway's error), rather than an answer
// that waiting will not change. A wait started before the API (a list
// accepted earlier, an API restarting) waits for it.
func transient(err error) bool {
	var (
		gaveUp      *RetriesExhaustedError
		unreachable *UnreachableError
		perr        *ProblemError
	)
	if errors.As(err, &perr) {
		switch perr.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true
		}
		return false
	}
	return errors.As(err, &gaveUp) || errors.As(err, &unreachable)
}

// gzipped returns an opener of open's data, gzip-compressed on the fly: a
// goroutine compresses into a pipe as the transport reads from it.
func gzipped(open func() (io.ReadCloser, error)) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		src, err := open()
		if err != nil {
			return nil, fmt.Errorf("cannot open the list: %w", err)
		}
		pr, pw := io.Pipe()
		b := &gzipBody{PipeReader: pr}
		go func() {
			defer src.Close()
			// BestSpeed: the link is what compression saves on, and a
			// higher level would make the CPU, not the link, the bound.
			zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
			sr := &sourceReader{r: src}
			_, err := io.Copy(zw, sr)
			if sr.err != nil {
				b.setErr(fmt.Errorf("error reading the list: %w", sr.err))
				pw.CloseWithError(b.sourceErr())
				return
			}
			if err == nil {
				err = zw.Close()
			}
			pw.CloseWithError(err) // nil: the end of the body
		}()
		return b, nil
	}
}

// gzipBody is a request body compressed as it is read. When the transport
// stops reading (the answer came early, or the request ended), Close makes
// the compressing goroutine stop and close the source.
type gzipBody struct {
	*io.PipeReader
	mu  sync.Mutex
	err error
}

func (b *gzipBody) setErr(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

// sourceErr is the error reading the caller's data, if that is why the
// body failed.
func (b *gzipBody) sourceErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// sourceReader keeps the error of reading the caller's data apart from
// errors writing into the pipe.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}
