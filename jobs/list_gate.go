package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// defaultGateWindow is how long a list's gate transaction admits model
// calls once it is open, unless ListGates.Window says otherwise: about
// what a batch of a list's calls takes to start together (the model slots
// free a few at a time), and short beside what a cancel may wait.
const defaultGateWindow = 100 * time.Millisecond

// maxEndedLists is how many ended lists a process remembers, to refuse
// their calls without Postgres; one forgotten is asked about again.
const maxEndedLists = 1024

// ListGates are a worker process's gates of its lists' model calls
// (classifier.Gate). A call of a list starts only inside a gate
// transaction of the list, which holds the list's gate lock shared and
// read that the list has not ended (db.ListGate); a cancel takes the lock
// exclusively (db.ListCancel), so once it commits no call of the list
// starts, and every call that started before it has had its request
// written.
//
// The calls of one list that start within Window of each other share one
// transaction, rather than each opening its own (four statements and a
// commit per call): the first call opens it (those that come meanwhile
// wait for that opening), the calls that come within Window of its opening
// join it without Postgres, and it commits once its window is over and
// every call it admitted has written its request (an idle one, at the end
// of its window). A call that comes later opens the list's next
// transaction. So a cancel waits at most Window plus the time the admitted
// calls take to write their requests: the next transaction asks for the
// lock after the cancel does, and Postgres queues it behind the cancel.
//
// Once a transaction read that the list ended, the process refuses the
// list's calls without Postgres (an end is final).
//
// The zero value is not usable: set DB (the pool) and Logger.
type ListGates struct {
	// DB opens the gate transactions: the pool, never a transaction (the
	// gates are used concurrently).
	DB db.Executor
	// Window is how long a gate transaction admits calls once open; zero:
	// defaultGateWindow.
	Window time.Duration
	Logger *slog.Logger

	mu sync.Mutex
	// open holds each list's transaction that still admits calls.
	open map[uuid.UUID]*gateTx
	// ended holds the lists found ended (ListGate's refusal), at most
	// maxEndedLists, oldest first in endedOrder.
	ended      map[uuid.UUID]error
	endedOrder []uuid.UUID
}

// gateTx is one gate transaction of a list. Its fields after opened are
// guarded by ListGates.mu; tx and err are set once, before opened closes.
type gateTx struct {
	ctx    context.Context // the opening's: the first caller's values, cancelled when no caller waits
	cancel context.CancelFunc
	opened chan struct{} // closed once the opening ended
	tx     pgx.Tx        // the open transaction (err nil)
	err    error         // the opening's error

	// held counts the calls admitted, or waiting for the opening, that
	// have not released.
	held int
	// closed: it admits no more calls (its window is over, or nobody
	// waited for its opening).
	closed bool
	// ending: its commit has started.
	ending bool
}

// Gate returns list id's gate: it refuses a call with db.ErrListEnded (or
// the error opening the transaction, or the call's ctx's), or admits it
// into a gate transaction of the list and returns its release, to be
// called once the call's request is written. A release never waits on
// Postgres, and the transaction commits even when the call's ctx is done.
func (g *ListGates) Gate(id uuid.UUID) classifier.Gate {
	return func(ctx context.Context) (func(), error) { return g.enter(ctx, id) }
}

func (g *ListGates) window() time.Duration {
	if g.Window > 0 {
		return g.Window
	}
	return defaultGateWindow
}

func (g *ListGates) enter(ctx context.Context, id uuid.UUID) (func(), error) {
	g.mu.Lock()
	if err := g.ended[id]; err != nil {
		g.mu.Unlock()
		return nil, err
	}
	t := g.open[id]
	if t == nil {
		// Opened with a context of its own: the callers that come meanwhile
		// wait for it too, and it is given up only when none still waits.
		t = &gateTx{opened: make(chan struct{})}
		t.ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
		if g.open == nil {
			g.open = map[uuid.UUID]*gateTx{}
		}
		g.open[id] = t
		go g.opening(id, t)
	}
	t.held++
	g.mu.Unlock()

	select {
	case <-t.opened:
		if t.err != nil {
			return nil, t.err
		}
	case <-ctx.Done():
		g.leave(id, t)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { g.leave(id, t) }) }, nil
}

// opening opens t: BEGIN, then the list's gate lock and status
// (db.ListGate). On success t admits calls for the window; on an error
// every caller waiting for it gets the error, and the next call opens
// another (or, the list ended, is refused).
func (g *ListGates) opening(id uuid.UUID, t *gateTx) {
	tx, err := db.Begin(t.ctx, g.DB)
	if err == nil {
		if err = db.ListGate(t.ctx, tx, id); err != nil {
			db.Rollback(t.ctx, tx)
			tx = nil
		}
	}
	g.mu.Lock()
	t.tx, t.err = tx, err
	close(t.opened)
	if err != nil {
		t.closed = true
		g.drop(id, t)
		if errors.Is(err, db.ErrListEnded) {
			g.remember(id, err)
		}
		g.mu.Unlock()
		t.cancel()
		return
	}
	if t.closed {
		// Every caller gave up while it opened: nobody joins it.
		t.ending = true
		g.mu.Unlock()
		g.end(t)
		return
	}
	g.mu.Unlock()
	time.AfterFunc(g.window(), func() { g.windowOver(id, t) })
}

// windowOver closes t to new calls; it commits now if no call holds it.
func (g *ListGates) windowOver(id uuid.UUID, t *gateTx) {
	g.mu.Lock()
	t.closed = true
	g.drop(id, t)
	end := t.held == 0 && !t.ending
	t.ending = t.ending || end
	g.mu.Unlock()
	if end {
		g.end(t)
	}
}

// leave is a call of t releasing (its request written, or the call ended
// before), or giving up waiting for t's opening.
func (g *ListGates) leave(id uuid.UUID, t *gateTx) {
	g.mu.Lock()
	t.held--
	end := false
	if t.held == 0 {
		select {
		case <-t.opened:
			end = t.err == nil && t.closed && !t.ending
			t.ending = t.ending || end
		default:
			// Nobody waits for the opening any more: stop it (it may be
			// waiting for the pool or the lock), and let the next call open
			// another.
			t.closed = true
			g.drop(id, t)
			t.cancel()
		}
	}
	g.mu.Unlock()
	if end {
		// Not on the caller's goroutine: a release is called as the request
		// is written, and must not wait on Postgres.
		go g.end(t)
	}
}

// end commits t; its calls have all written their requests.
func (g *ListGates) end(t *gateTx) {
	defer t.cancel()
	ctx := context.WithoutCancel(t.ctx)
	if err := db.Commit(ctx, t.tx); err != nil {
		db.Rollback(ctx, t.tx)
		if g.Logger != nil {
			g.Logger.WarnContext(ctx, "error ending a list's gate transaction", "error", err)
		}
	}
}

// drop forgets t as id's open transaction, if it still is; g.mu is held.
func (g *ListGates) drop(id uuid.UUID, t *gateTx) {
	if g.open[id] == t {
		delete(g.open, id)
	}
}

// remember refuses list id's calls from now on with err; g.mu is held.
func (g *ListGates) remember(id uuid.UUID, err error) {
	if g.ended == nil {
		g.ended = map[uuid.UUID]error{}
	}
	if _, ok := g.ended[id]; ok {
		return
	}
	g.ended[id] = err
	g.endedOrder = append(g.endedOrder, id)
	if len(g.endedOrder) > maxEndedLists {
		delete(g.ended, g.endedOrder[0])
		g.endedOrder = g.endedOrder[1:]
	}
}
