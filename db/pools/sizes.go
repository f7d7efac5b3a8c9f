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

// DefaultAPIMaxConns is the API's pool when neither API_DB_MAX_CONNS nor
// DB_MAX_CONNS is set. A request holds one connection for a few
// milliseconds (an accept is about 2–5 ms of database work), so 20 serve
// thousands of requests a second, more than one API process answers on a
// few cores; the few long holders (a list upload while it copies, a
// results download, River UI) fit beside them. And api + two workers
// (20 + 2 × 36) stay under a stock Postgres' max_connections of 100.
const DefaultAPIMaxConns = 20

// Sizes are what sizes a process's pools: the four settings (0: not set)
// and the workers that may hold a connection at once. Its validation
// messages name the fields; the binary names its variables instead.
type Sizes struct {
	DBMaxConns       int32 // DB_MAX_CONNS: each pool whose own size is not set
	APIDBMaxConns    int32 // API_DB_MAX_CONNS: the API's pool (api, all)
	WorkerDBMaxConns int32 // WORKER_DB_MAX_CONNS: the workers' connections (worker, all)
	ListDBMaxConns   int32 // LIST_DB_MAX_CONNS: of them, list work's pool
	// ClassifyWorkers and ListWorkers are the queues' workers
	// (jobs.Settings): the jobs that may hold a connection at once.
	ClassifyWorkers, ListWorkers int
}

// API is the size of the API's pool: APIDBMaxConns, else DBMaxConns, else
// DefaultAPIMaxConns.
func (s Sizes) API() int32 { return cmp.Or(s.APIDBMaxConns, s.DBMaxConns, DefaultAPIMaxConns) }

// Worker is how many connections the workers hold in all:
// WorkerDBMaxConns, else DBMaxConns, else a connection for each classify
// job that may run at once, 16 for list work (list work's own pool takes 4
// of them by default, List; the others serve jobs), and 10 for River's
// producers, maintenance, webhook deliveries and the purge. The sum is the
// figure docs/operating.md's max_connections arithmetic uses.
func (s Sizes) Worker() int32 {
	return cmp.Or(s.WorkerDBMaxConns, s.DBMaxConns, int32(s.ClassifyWorkers+min(s.ListWorkers, 16)+10))
}

// List is the part of the workers' connections that list work (chunks
// and batches) may hold, in a pool of its own: ListDBMaxConns, else
// min(ListWorkers, 4) and at most half of them. The rest (Jobs) serve
// classify jobs, River and webhooks. In one pool, a draining list's
// statements queued ahead of interactive jobs' (the `all` bench: 9,861
// waits, 13 minutes in all, p95 of a 10-domain job 6× idle). Four, not 16:
// a list's statements are short, and four drained a list as fast as 16 in
// `all` at C=32 (146 against 144 rows/s) while 16 busy backends took the
// CPU the API's status polls needed (their p99 7–9 ms with four, 13–18 ms
// with 16; three runs each, docs/BENCHMARKS.md).
func (s Sizes) List() int32 {
	if s.ListDBMaxConns > 0 {
		return s.ListDBMaxConns
	}
	return max(1, min(int32(min(s.ListWorkers, 4)), s.Worker()/2))
}

// Jobs is the workers' pool for everything but list work.
func (s Sizes) Jobs() int32 { return s.Worker() - s.List() }

// Validate refuses a negative size and a list pool that leaves the
// classify jobs and River fewer than 2 connections.
func (s Sizes) Validate() error {
	if s.DBMaxConns < 0 || s.APIDBMaxConns < 0 || s.WorkerDBMaxConns < 0 || s.ListDBMaxConns < 0 {
		return errors.New("DBMaxConns, APIDBMaxConns, WorkerDBMaxConns and ListDBMaxConns must not be negative (0 is the default)")
	}
	if s.Jobs() < 2 {
		return fmt.Errorf("ListDBMaxConns (%d) must leave at least 2 of the workers' %d connections (WorkerDBMaxConns) to classify jobs and River",
			s.List(), s.Worker())
	}
	return nil
}
