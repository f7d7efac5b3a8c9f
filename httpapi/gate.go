package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// gate counts the requests of one kind this process is serving (uploads,
// downloads), in all and per caller, so that one more is refused (429)
// before any work once a bound is reached. Such a request holds no
// database connection while it waits on its client, but it holds a
// goroutine, a socket and some memory (a spool file and a set of domains
// for an upload, a page of rows for a download) for as long as its caller
// takes.
type gate struct {
	mu        sync.Mutex
	max       int
	perCaller int
	refusal   gateRefusal
	n         int
	callers   map[string]*callerCount
}

// gateRefusal is how a gate says no: the problem type, its Retry-After,
// and the detail's words: what the requests are ("uploads"), what the
// service does with them ("reading", "reads"), and a note on the caller's
// count (" (dry runs count)").
type gateRefusal struct {
	slug, what, doing, does, callerNote string
	retryAfter                          time.Duration
	// reserve keeps the last quarter of the places for callers with none
	// in progress: a caller's second and later requests at once may not
	// take them.
	reserve bool
}

// callerCount are one caller's requests in progress: all, and those marked
// (an upload that would make a list, not a dry run).
type callerCount struct{ all, marked int }

func newGate(max, perCaller int, refusal gateRefusal) *gate {
	return &gate{max: max, perCaller: perCaller, refusal: refusal, callers: map[string]*callerCount{}}
}

// newUploadGate counts list uploads, dry runs included; those that would
// make a list are marked.
func newUploadGate(max, perCaller int) *gate {
	return newGate(max, perCaller, gateRefusal{slug: "too-many-uploads", what: "uploads", doing: "reading", does: "reads",
		callerNote: " (dry runs count)", retryAfter: uploadsRetryAfter, reserve: true})
}

// newDownloadGate counts result downloads.
func newDownloadGate(max, perCaller int) *gate {
	return newGate(max, perCaller, gateRefusal{slug: "too-many-downloads", what: "downloads", doing: "sending", does: "sends",
		retryAfter: downloadsRetryAfter})
}

// enter admits a request of caller, or returns a 429 problem that says the
// counts. marked is how many of the caller's other marked requests are in
// progress here (for uploads: those that would make a list, which count
// toward its active lists). leave must be called once the request ends;
// calling it again does nothing.
func (g *gate) enter(caller string, mark bool) (leave func(), marked int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.callers[caller]
	if c == nil {
		c = &callerCount{}
	}
	r := g.refusal
	reserve := 0
	if r.reserve {
		reserve = (g.max + 3) / 4 // a quarter of the places, rounded up
	}
	switch {
	case c.all >= g.perCaller:
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: r.slug, retryAfter: r.retryAfter,
			detail: fmt.Sprintf("You have %d %s in progress%s; the limit is %d at once. "+
				"Retry when one has ended, after the seconds in Retry-After.", c.all, r.what, r.callerNote, g.perCaller)}
	case g.n >= g.max:
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: r.slug, retryAfter: r.retryAfter,
			detail: fmt.Sprintf("The service is %s %d %s, as many as it %s at once; retry after the seconds in Retry-After.",
				r.doing, g.n, r.what, r.does)}
	case reserve > 0 && c.all > 0 && g.n >= g.max-reserve:
		// A caller's second and later requests at once leave the last
		// quarter of the places to callers with none in progress: four
		// callers trickling two uploads each held all eight for up to 30
		// minutes, and a fifth caller's one-row list got 429 (issue 36).
		what := r.what
		if c.all == 1 {
			what = strings.TrimSuffix(what, "s")
		}
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: r.slug, retryAfter: r.retryAfter,
			detail: fmt.Sprintf("You have %d %s in progress, and the service is %s %d of the %d it %s at once: "+
				"the last %d are kept for callers with none in progress. Retry when yours has ended, after the seconds in Retry-After.",
				c.all, what, r.doing, g.n, g.max, r.does, reserve)}
	}
	marked = c.marked
	g.n++
	c.all++
	if mark {
		c.marked++
	}
	g.callers[caller] = c
	left := false
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if left {
			return
		}
		left = true
		g.n--
		c.all--
		if mark {
			c.marked--
		}
		if c.all == 0 {
			delete(g.callers, caller)
		}
	}, marked, nil
}
