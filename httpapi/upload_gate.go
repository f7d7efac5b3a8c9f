package httpapi

import (
	"fmt"
	"net/http"
	"sync"
)

// uploadGate counts the uploads this process is reading, in all and per
// caller, dry runs included, so that one more is refused (429) before a
// byte of its body is read once a bound is reached. A caller's second and
// later uploads at once may not take the last quarter of the places: those
// are kept for callers with none in progress. An upload in progress
// holds no database connection (see spool), but it holds a goroutine, a
// socket, a spool file and its set of distinct domains for as long as its
// caller takes to send it.
type uploadGate struct {
	mu        sync.Mutex
	max       int
	perCaller int
	n         int
	callers   map[string]*callerUploads
}

// callerUploads are one caller's uploads in progress: all, and those that
// would make a list (not dry runs).
type callerUploads struct{ all, lists int }

func newUploadGate(max, perCaller int) *uploadGate {
	return &uploadGate{max: max, perCaller: perCaller, callers: map[string]*callerUploads{}}
}

// enter admits an upload of caller, or returns a 429 problem. lists is how
// many of the caller's other uploads that would make a list are in
// progress here: they count toward its active lists. leave must be called
// once, when the upload ends.
func (g *uploadGate) enter(caller string, dryRun bool) (leave func(), lists int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.callers[caller]
	if c == nil {
		c = &callerUploads{}
	}
	reserve := (g.max + 3) / 4 // a quarter of the places, rounded up
	switch {
	case c.all >= g.perCaller:
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: "too-many-uploads", retryAfter: uploadsRetryAfter,
			detail: fmt.Sprintf("You have %d uploads in progress (dry runs count); the limit is %d at once. "+
				"Retry when one has ended, after the seconds in Retry-After.", c.all, g.perCaller)}
	case g.n >= g.max:
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: "too-many-uploads", retryAfter: uploadsRetryAfter,
			detail: fmt.Sprintf("The service is reading %d uploads, as many as it reads at once; retry after the seconds in Retry-After.", g.n)}
	case c.all > 0 && g.n >= g.max-reserve:
		// A caller's second and later uploads at once leave the last
		// quarter of the places to callers with none in progress: four
		// callers trickling two uploads each held all eight for up to 30
		// minutes, and a fifth caller's one-row list got 429 (issue 36).
		uploads := "uploads"
		if c.all == 1 {
			uploads = "upload"
		}
		return nil, 0, &problem{status: http.StatusTooManyRequests, slug: "too-many-uploads", retryAfter: uploadsRetryAfter,
			detail: fmt.Sprintf("You have %d %s in progress, and the service is reading %d of the %d it reads at once: "+
				"the last %d are kept for callers with none in progress. Retry when yours has ended, after the seconds in Retry-After.",
				c.all, uploads, g.n, g.max, reserve)}
	}
	lists = c.lists
	g.n++
	c.all++
	if !dryRun {
		c.lists++
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
		if !dryRun {
			c.lists--
		}
		if c.all == 0 {
			delete(g.callers, caller)
		}
	}, lists, nil
}
