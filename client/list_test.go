package client_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// These tests cover what the real API (tested end to end in
// cmd/domainclass) cannot be made to do on demand: refuse an upload once
// after reading it, and cut off a download midway.

type upload struct {
	header http.Header
	query  string
	body   string
}

func TestUploadList_RetriesWithTheSameKeyReopeningTheBody(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		uploads []upload
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		require.NoError(t, err)
		b, err := io.ReadAll(zr)
		require.NoError(t, err)
		mu.Lock()
		uploads = append(uploads, upload{header: r.Header.Clone(), query: r.URL.RawQuery, body: string(b)})
		n := len(uploads)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type": "/problems/unavailable", "title": "Service unavailable", "status": 503, "detail": "down"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"list_id": "0190", "status": "PENDING", "rows": 2}`))
	}))
	t.Cleanup(srv.Close)

	list := "domain,ref\nacme.com,1\n" + strings.Repeat("x", 200_000) + "\n"
	opened := 0
	c := client.New(srv.URL, "dc_key")
	var retries []string
	c.OnRetry = func(reason string, _ time.Duration) { retries = append(retries, reason) }
	a, err := c.UploadList(context.Background(), func() (io.ReadCloser, error) {
		opened++
		return io.NopCloser(strings.NewReader(list)), nil
	}, client.ListOptions{Classifier: "cpg", ContentType: client.ListCSV})
	require.NoError(t, err)
	require.Equal(t, "0190", a.ListID)
	require.Equal(t, 2, opened, "the body is opened again for the retry")
	require.Equal(t, []string{"503 Service Unavailable: down"}, retries)
	require.Len(t, uploads, 2)
	for _, u := range uploads {
		require.Equal(t, list, u.body, "the body arrives whole, gzip-compressed")
		require.Equal(t, "gzip", u.header.Get("Content-Encoding"))
		require.Equal(t, "text/csv", u.header.Get("Content-Type"))
		require.Equal(t, "Bearer dc_key", u.header.Get("Authorization"))
		require.Equal(t, "classifier=cpg", u.query)
		require.NotEmpty(t, u.header.Get("Idempotency-Key"))
	}
	require.Equal(t, uploads[0].header.Get("Idempotency-Key"), uploads[1].header.Get("Idempotency-Key"),
		"a retry sends the same key, so a lost answer never makes a second list")
}

func TestUploadList_ErrorsOfTheCallersDataAreNotRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "")

	_, err := c.UploadList(context.Background(), func() (io.ReadCloser, error) { return nil, errors.New("no such file") },
		client.ListOptions{ContentType: client.ListText})
	require.EqualError(t, err, "cannot open the list: no such file")

	broken := errors.New("disk on fire")
	_, err = c.UploadList(context.Background(), func() (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(strings.NewReader(strings.Repeat("a.com\n", 50_000)), errReader{broken})), nil
	}, client.ListOptions{ContentType: client.ListText})
	require.ErrorIs(t, err, broken)
	require.Contains(t, err.Error(), "error reading the list")
	require.LessOrEqual(t, calls.Load(), int64(1), "not retried")

	_, err = c.UploadList(context.Background(), nil, client.ListOptions{ContentType: "application/json"})
	require.ErrorContains(t, err, `unsupported list content type "application/json"`)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestListResults_StreamsAndACutOffIsAnError(t *testing.T) {
	t.Parallel()
	rows := "row,input\n1,a.com\n2,b.com\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/lists/whole/results":
			require.Equal(t, "application/x-ndjson", r.Header.Get("Accept"))
			require.Equal(t, "after=7&status=COMPLETED%2CFAILED", r.URL.RawQuery)
			_, _ = w.Write([]byte(rows))
		case "/lists/cut/results":
			w.Header().Set("Content-Type", "text/csv")
			_, _ = w.Write([]byte(rows))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // what the API does when its cursor fails midway
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type": "/problems/not-found", "title": "Not found", "status": 404, "detail": "No list with this id."}`))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "")

	var out bytes.Buffer
	n, err := c.ListResults(context.Background(), "whole", &out,
		client.ResultsOptions{NDJSON: true, Status: []string{"COMPLETED", "FAILED"}, After: 7})
	require.NoError(t, err)
	require.Equal(t, rows, out.String())
	require.Equal(t, int64(len(rows)), n)

	out.Reset()
	n, err = c.ListResults(context.Background(), "cut", &out, client.ResultsOptions{})
	require.EqualError(t, err, "the results were cut off after 26 bytes: the API ended the answer early")
	require.Equal(t, int64(len(rows)), n)
	require.Equal(t, rows, out.String(), "what arrived was written")

	_, err = c.ListResults(context.Background(), "gone", &out, client.ResultsOptions{})
	var perr *client.ProblemError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusNotFound, perr.StatusCode)
	require.Equal(t, wire.Problem{Type: "/problems/not-found", Title: "Not found", Status: 404, Detail: "No list with this id."}, perr.Problem)
}

// A caller with as many downloads in progress as it may have gets 429
// too-many-downloads: the download waits its Retry-After and starts then.
func TestListResults_WaitsForAFreeDownload(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type": "/problems/too-many-downloads", "title": "Too many downloads in progress", "status": 429,
				"detail": "You have 4 downloads in progress; the limit is 4 at once."}`))
			return
		}
		_, _ = w.Write([]byte("row,input\n1,a.com\n"))
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "")
	var retries []string
	c.OnRetry = func(reason string, wait time.Duration) {
		retries = append(retries, fmt.Sprintf("%s (%s)", reason, wait))
	}
	var out bytes.Buffer
	_, err := c.ListResults(context.Background(), "l", &out, client.ResultsOptions{})
	require.NoError(t, err)
	require.Equal(t, "row,input\n1,a.com\n", out.String())
	require.Equal(t, int64(2), calls.Load())
	require.Equal(t, []string{"429 Too Many Requests: You have 4 downloads in progress; the limit is 4 at once. (1s)"}, retries,
		"the wait is the answer's Retry-After, and says why")
}
