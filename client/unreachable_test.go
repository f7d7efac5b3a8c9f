package client_test

import (
	"context"
	"io"
	"net"
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

// closedPort is an address on loopback where nothing listens: connections
// to it are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestClient_NoServiceFailsFast (issue 36, a new user): a first request
// that never reached the API (connection refused) says so within seconds,
// instead of retrying for 5 minutes as if a running API were busy.
func TestClient_NoServiceFailsFast(t *testing.T) {
	t.Parallel()
	c := client.New("http://"+closedPort(t), "")
	var retries atomic.Int32
	c.OnRetry = func(string, time.Duration) { retries.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Classify(ctx, wire.ClassifyRequest{Domains: []string{"acme.com"}}, "k1")
	took := time.Since(start)
	var unreachable *client.UnreachableError
	require.ErrorAs(t, err, &unreachable, "%v after %s", err, took)
	require.Less(t, took, 5*time.Second)
	require.Zero(t, retries.Load(), "nothing to retry: the request never left")
	require.Equal(t, c.BaseURL, unreachable.URL)
	require.Equal(t, "no service at "+c.BaseURL+" (connection refused)", err.Error())

	_, err = c.EstimateList(ctx, func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("acme.com\n")), nil },
		client.ListOptions{ContentType: client.ListText})
	require.ErrorAs(t, err, &unreachable, "a list's upload too")
}

// TestClient_RunningServiceIsStillRiddenOut: what a running API does (a
// 503, a connection reset after it was reached) is retried with the same
// Idempotency-Key, as before; and once the API was reached, a refused
// connection is a restart, retried too.
func TestClient_RunningServiceIsStillRiddenOut(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		keys []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		switch n {
		case 1: // the connection drops after the request reached the API
			conn, _, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			_ = conn.(*net.TCPConn).SetLinger(0) // a reset
			_ = conn.Close()
		case 2:
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type": "/problems/unavailable", "title": "Service unavailable", "status": 503}`))
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"job_id": "j1", "status": "PENDING"}`))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "")
	var reasons []string
	c.OnRetry = func(reason string, _ time.Duration) { reasons = append(reasons, reason) }
	a, err := c.Classify(context.Background(), wire.ClassifyRequest{Domains: []string{"acme.com"}}, "k1")
	require.NoError(t, err)
	require.Equal(t, "j1", a.JobID)
	require.Len(t, reasons, 2, "%q", reasons)
	require.Contains(t, reasons[1], "503")
	require.Equal(t, []string{`"k1"`, `"k1"`, `"k1"`}, keys, "each retry with the same key")

	// The API goes away after it was reached: a restart, waited for.
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	c.RetryFor = 300 * time.Millisecond
	_, err = c.Job(context.Background(), "j1")
	var gaveUp *client.RetriesExhaustedError
	require.ErrorAs(t, err, &gaveUp, "retried until RetryFor, not refused at once")
	require.Contains(t, gaveUp.Reason, addr)
}
