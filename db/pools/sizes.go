// Package pools sizes the database pools of a service process and exports
// their metrics. A process has one pool per role it runs: `all` has two,
// and the workers' list work a pool of its own. One pool for both let list
// work take every connection while a million-row list drained, and the API
// answered 503 to 59 probes of 60 (issue 26): a request waited behind
// hundreds of workers' queries in the pool's queue. Apart, the API's
// requests only ever wait for each other, as they do in an `api` process
// beside `worker` processes.
package pools

import (
	"cmp"
	"errors"
	"fmt"
)

// DefaultAPIMaxConns is the API's pool when DB_MAX_CONNS is not set. A request holds one connection for a few
// milliseconds (an accept is about 2–5 ms of database work), so 20 serve
// thousands of requests a second, more than one API process answers on a
// few cores; the few long holders (a list upload while it copies, a
// results download, River UI) fit beside them. And api + two workers
// (20 + 2 × 36) stay under a stock Postgres' max_connections of 100.
const DefaultAPIMaxConns = 20

// Sizes are what sizes a process's pools: the one setting (0: not set)
// and the workers that may hold a connection at once. Its validation
// messages name the fields; the binary names its variables instead. One
// size, not one per role (issue 38): the API's pool and the workers'
// connections are each DBMaxConns, and list work's part of the workers'
// is derived (List); a size set for it only moved the same connections
// between the two.
type Sizes struct {
	DBMaxConns int32 // DB_MAX_CONNS: the API's pool, and the workers' connections
	// ClassifyWorkers and ListWorkers are the queues' workers
	// (jobs.Settings): the jobs that may hold a connection at once.
	ClassifyWorkers, ListWorkers int
}

// API is the size of the API's pool: DBMaxConns, else DefaultAPIMaxConns.
func (s Sizes) API() int32 { return cmp.Or(s.DBMaxConns, DefaultAPIMaxConns) }

// Worker is how many connections the workers hold in all: DBMaxConns,
// else a connection for each classify
// job that may run at once, 16 for list work (list work's own pool takes 4
// of them by default, List; the others serve jobs), and 10 for River's
// producers, maintenance, webhook deliveries and the purge. The sum is the
// figure docs/operating.md's max_connections arithmetic uses.
func (s Sizes) Worker() int32 {
	return cmp.Or(s.DBMaxConns, int32(s.ClassifyWorkers+min(s.ListWorkers, 16)+10))
}

// List is the part of the workers' connections that list work (chunks
// and batches) may hold, in a pool of its own: min(ListWorkers, 4) and at
// most half of them. The rest (Jobs) serve
// classify jobs, River and webhooks. In one pool, a draining list's
// statements queued ahead of interactive jobs' (the `all` bench: 9,861
// waits, 13 minutes in all, p95 of a 10-domain job 6× idle). Four, not 16:
// a list's statements are short, and four drained a list as fast as 16 in
// `all` at C=32 (146 against 144 rows/s) while 16 busy backends took the
// CPU the API's status polls needed (their p99 7–9 ms with four, 13–18 ms
// with 16; three runs each, docs/BENCHMARKS.md).
func (s Sizes) List() int32 {
	return max(1, min(int32(min(s.ListWorkers, 4)), s.Worker()/2))
}

// Jobs is the workers' pool for everything but list work.
func (s Sizes) Jobs() int32 { return s.Worker() - s.List() }

// Validate refuses a negative size and one that leaves the classify jobs
// and River fewer than 2 connections beside list work's.
func (s Sizes) Validate() error {
	if s.DBMaxConns < 0 {
		return errors.New("DBMaxConns must not be negative (0 is each role's default)")
	}
	if s.Jobs() < 2 {
		return fmt.Errorf("DBMaxConns (%d) must leave at least 2 connections to classify jobs and River beside list work's %d: set at least 3",
			s.Worker(), s.List())
	}
	return nil
}
