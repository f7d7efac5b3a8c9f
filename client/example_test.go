package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// A caller classifies two domains and waits for the answers. The API here
// is a stand-in on loopback that is busy (503) for the first try: the
// client retries with the same Idempotency-Key, so the job is queued once.
func Example() {
	api := fakeAPI()
	defer api.Close()

	c := client.New(api.URL, "dc_live_example")
	ctx := context.Background()
	accepted, err := c.Classify(ctx, wire.ClassifyRequest{Domains: []string{"unilever.com", "github.com"}}, "batch-7")
	if err != nil {
		fmt.Println(err) // a *client.ProblemError when the API refused the request
		return
	}
	reports, err := c.Wait(ctx, []string{accepted.JobID}, 10*time.Millisecond, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range reports[0].Results {
		fmt.Println(r.Domain, r.Status, *r.Answer)
	}
	// Output:
	// unilever.com COMPLETED true
	// github.com COMPLETED false
}

// fakeAPI answers as domainclass does: 503 with Retry-After to the first
// POST, 202 to the next if it carries the same key, then the job's report.
func fakeAPI() *httptest.Server {
	var posts atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && posts.Add(1) == 1:
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type": "/problems/unavailable", "title": "Service unavailable", "status": 503}`)
		case r.Method == http.MethodPost && r.Header.Get("Idempotency-Key") == `"batch-7"`:
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"job_id": "j1", "status": "PENDING", "classifier": "cpg"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/domains/classify/j1":
			fmt.Fprint(w, `{"job_id": "j1", "classifier": "cpg", "status": "COMPLETED", "progress": {"total": 2, "done": 2},
				"results": [{"domain": "unilever.com", "status": "COMPLETED", "answer": true, "is_cpg": true},
				            {"domain": "github.com", "status": "COMPLETED", "answer": false, "is_cpg": false}]}`)
		default:
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
		}
	}))
}
