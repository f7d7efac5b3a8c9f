package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
)

// TestWaitList_RidesOutAnUnavailableAPI: a list runs for hours, and the API
// may answer 503 (Postgres busy) or not at all (restarting) for longer than
// one call retries; waiting goes on until the list ends (issue 27: `submit
// --wait` gave up after 5 minutes of 503s without writing --out).
func TestWaitList_RidesOutAnUnavailableAPI(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := polls.Add(1)
		switch {
		case n <= 2:
			w.Write([]byte(`{"list_id": "l", "status": "RUNNING", "rows": 10, "progress": {"done": 3, "total": 10}}`))
		case n <= 8:
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"type": "/problems/unavailable", "title": "Service unavailable", "status": 503, "detail": "The database is unavailable."}`))
		default:
			w.Write([]byte(`{"list_id": "l", "status": "COMPLETED", "rows": 10, "progress": {"done": 10, "total": 10}}`))
		}
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "")
	c.RetryFor = 50 * time.Millisecond // one call gives up long before the API is back
	var (
		mu      sync.Mutex
		reasons []string
	)
	c.OnRetry = func(reason string, _ time.Duration) { mu.Lock(); reasons = append(reasons, reason); mu.Unlock() }
	s, err := c.WaitList(context.Background(), "l", 10*time.Millisecond, nil)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusCompleted, s.Status)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, reasons, "each wait is told, so that it can be shown")
	require.Contains(t, reasons[0], "503")
}

func TestWaitList_RidesOutAnAPIThatIsDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // connections are refused until it is back
	c := client.New("http://"+addr, "")
	c.RetryFor = 50 * time.Millisecond
	back := make(chan struct{})
	c.OnRetry = func(string, time.Duration) {
		select {
		case <-back:
		default:
			close(back)
		}
	}
	go func() {
		<-back
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"list_id": "l", "status": "COMPLETED", "rows": 1, "progress": {"done": 1, "total": 1}}`))
		})}
		t.Cleanup(func() { _ = srv.Close() })
		_ = srv.Serve(ln)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.WaitList(ctx, "l", 10*time.Millisecond, nil)
	require.NoError(t, err)
	require.Equal(t, classifier.StatusCompleted, s.Status)
}

func TestWaitList_StopsAtAnAnswerThatWillNotChange(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type": "/problems/not-found", "title": "Not found", "status": 404, "detail": "No list with this id."}`))
	}))
	t.Cleanup(srv.Close)
	_, err := client.New(srv.URL, "").WaitList(context.Background(), "l", 10*time.Millisecond, nil)
	var perr *client.ProblemError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusNotFound, perr.StatusCode)
}
