package llm

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// SlotObserver is told how many slots each class holds whenever that
// changes, and how long each call waited for its slot.
type SlotObserver interface {
	ObserveSlotsInUse(c classifier.CallClass, n int)
	ObserveSlotWait(c classifier.CallClass, d time.Duration)
}

// scheduler hands out a process's model slots, its rate and its tokens, a
// slot at a time as one frees, in this order:
//
//  1. interactive calls, first come first served;
//  2. list calls: to the caller holding the fewest slots for its weight
//     among those waiting (callers holding as many take turns), and within
//     that caller to its list holding the fewest.
//
// So lists take every slot no interactive call wants, an interactive call
// waits only for the next slot to free (never behind a list's queue) and,
// with a reserve set, list calls leave that many requests and tokens in the
// buckets for interactive calls, so that a job's calls start together; and
// callers' lists hold shares of the rest in proportion to their weights
// (equal, unless the deployment's capacity says otherwise: a caller whose
// lists also run on other processes weighs less here), whatever their
// sizes: a caller's second list splits that caller's share instead of
// adding one. Nothing is preempted: a call keeps its slot until it returns.
//
// Its bounds move while it runs (setLimits): the slots, requests and tokens
// the deployment's capacity leases to this process, and a cool-down before
// which no call starts.
type scheduler struct {
	obs SlotObserver
	// poke, when set, is called (without blocking) when demand of a new
	// kind arrives: the first interactive call, or a new caller's list.
	poke func()

	mu          sync.Mutex
	slots       int
	busy        int
	requests    *bucket // nil: no rate
	tokens      *bucket // nil: no tokens limit
	cooldown    time.Time
	reserve     [2]float64 // requests and tokens list calls leave for interactive ones
	weights     map[string]float64
	inUse       map[classifier.CallClass]int
	interactive []*waiter
	// interactiveLoad is the moving mean of the interactive calls in
	// flight and waiting, the demand a lease reports for them.
	interactiveLoad meanLoad
	callers         map[string]*callerShare
	grants          uint64 // list calls granted, to order callers' turns
	// pace spaces list calls' starts over a call's time in its slot (see
	// listPace); nil until a list call has returned.
	pace     *bucket
	held     float64     // moving mean of a list call's seconds in its slot
	timer    *time.Timer // set while waiting for the rate, the tokens or a cool-down
	timerAt  time.Time
	stopping bool
}

type waiter struct {
	share   classifier.Share
	tokens  float64
	since   time.Time
	ready   chan struct{} // closed when granted, or refused
	granted bool
	refused bool
}

// ErrStopping refuses a call that had not started when its process began
// to stop: the domain is given back (classifier.ErrBusy: its job snoozes,
// no attempt used) and another process asks the model, while the calls in
// flight finish within the soft stop instead of being cancelled and asked
// again.
var ErrStopping = fmt.Errorf("the worker process is stopping: %w", classifier.ErrBusy)

type callerShare struct {
	name  string
	inUse int
	lists map[string]*listShare
	// lastGrant is the scheduler's count of grants when this caller's last
	// call was granted: between callers holding as much, the one served
	// longer ago goes first.
	lastGrant uint64
}

type listShare struct {
	inUse   int
	waiting []*waiter
}

// newScheduler returns a scheduler of slots calls in flight, started no
// faster than requests allows (nil: no rate).
func newScheduler(slots int, requests *bucket, obs SlotObserver) *scheduler {
	return &scheduler{requests: requests, obs: obs, slots: slots, inUse: map[classifier.CallClass]int{}, callers: map[string]*callerShare{},
		interactiveLoad: meanLoad{window: interactiveWindow}}
}

// limits are a scheduler's bounds: slots in flight, requests and tokens a
// second (+Inf: none), a cool-down, and the weights of list callers.
type limits struct {
	slots          int
	requestsPerSec float64
	requestsBurst  float64 // 0: 1
	tokensPerSec   float64
	tokensBurst    float64
	// reserve is what list calls leave in the buckets for interactive
	// calls: requests and tokens (see Capacity.schedulerLimits).
	reserve  [2]float64
	cooldown time.Time
	weights  map[string]float64
}

// setLimits changes the bounds; calls already granted keep their slots.
// A bucket it makes starts empty: a process that joins the deployment, or
// gets a limit it had not, fills its share at the share's pace instead of
// sending a burst into an account the others keep busy.
func (s *scheduler) setLimits(l limits) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots, s.cooldown, s.weights = l.slots, l.cooldown, l.weights
	burst := math.Max(1, l.requestsBurst)
	switch {
	case math.IsInf(l.requestsPerSec, 1):
		s.requests = nil
	case s.requests == nil:
		s.requests = newBucket(l.requestsPerSec, burst+l.reserve[0], now)
		s.requests.level = 0
	default:
		s.requests.set(l.requestsPerSec, burst+l.reserve[0], now)
	}
	switch {
	case math.IsInf(l.tokensPerSec, 1):
		s.tokens = nil
	case s.tokens == nil:
		s.tokens = newBucket(l.tokensPerSec, l.tokensBurst+l.reserve[1], now)
		s.tokens.level = 0
	default:
		s.tokens.set(l.tokensPerSec, l.tokensBurst+l.reserve[1], now)
	}
	s.reserve = l.reserve
	s.dispatch()
}

// correct charges a call's tokens once its usage is known: delta more than
// was estimated (less, when negative, gives them back).
func (s *scheduler) correct(delta float64) {
	if delta == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		return
	}
	s.tokens.refill(time.Now())
	s.tokens.give(-delta)
	s.dispatch()
}

// takeUnused returns the requests and tokens the process's share brought
// since the last call that its buckets had no room for: its share of the
// account, held while no call here could spend it.
func (s *scheduler) takeUnused() (requests, tokens float64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests.takeUnused(now), s.tokens.takeUnused(now)
}

// countInteractive records the interactive calls in flight and waiting
// now. s.mu is held.
func (s *scheduler) countInteractive() {
	s.interactiveLoad.set(time.Now(), s.interactiveNow())
}

// interactiveNow is the interactive calls in flight and waiting. s.mu is
// held.
func (s *scheduler) interactiveNow() int {
	return s.inUse[classifier.ClassInteractive] + len(s.interactive)
}

// demand is what the process's calls ask for: list calls in flight and
// waiting now, by caller, and the interactive calls' moving mean (see
// interactiveWindow).
func (s *scheduler) demand() (interactive float64, lists map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lists = map[string]float64{}
	for name, c := range s.callers {
		n := c.inUse
		for _, l := range c.lists {
			n += len(l.waiting)
		}
		lists[name] = float64(n)
	}
	interactive = s.interactiveLoad.read(time.Now())
	if len(s.interactive) > 0 {
		// Calls wait here now: the mean is behind them.
		interactive = math.Max(interactive, float64(s.interactiveNow()))
	}
	return interactive, lists
}

// acquire waits for a slot, a rate token and tokens for a call of share s,
// and returns the slot's release.
func (s *scheduler) acquire(ctx context.Context, sh classifier.Share, tokens float64) (release func(), err error) {
	w := &waiter{share: sh, tokens: tokens, since: time.Now(), ready: make(chan struct{})}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil, ErrStopping
	}
	s.enqueue(w)
	s.dispatch()
	s.mu.Unlock()

	select {
	case <-w.ready:
		if w.refused {
			return nil, ErrStopping
		}
	case <-ctx.Done():
		s.mu.Lock()
		granted := w.granted
		if !granted && !w.refused {
			s.dequeue(w)
		}
		s.mu.Unlock()
		if granted {
			s.release(sh)
		}
		return nil, ctx.Err()
	}
	start := time.Now()
	if s.obs != nil {
		s.obs.ObserveSlotWait(sh.Class, start.Sub(w.since))
	}
	var once sync.Once
	return func() { once.Do(func() { s.releaseHeld(sh, time.Since(start)) }) }, nil
}

// stop refuses every call waiting and every call asked from now on.
func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for w := s.next(); w != nil; w = s.next() {
		s.take(w)
		if w.share.Class == classifier.ClassList {
			s.forget(w.share)
		}
		w.refused = true
		close(w.ready)
	}
	s.countInteractive()
}

func (s *scheduler) release(sh classifier.Share) { s.releaseHeld(sh, 0) }

// releaseHeld frees the slot of a call of share sh that held it for held
// (0: not known, as for a call that gave up once granted).
func (s *scheduler) releaseHeld(sh classifier.Share, held time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh.Class == classifier.ClassList && held > 0 {
		s.paceList(held)
	}
	s.busy--
	s.inUse[sh.Class]--
	s.countInteractive()
	if sh.Class == classifier.ClassList {
		c := s.callers[sh.Caller]
		c.inUse--
		c.lists[sh.List].inUse--
		s.forget(sh)
	}
	s.observe(sh.Class)
	s.dispatch()
}

func (s *scheduler) enqueue(w *waiter) {
	if w.share.Class != classifier.ClassList {
		s.interactive = append(s.interactive, w)
		s.countInteractive()
		if len(s.interactive) == 1 && s.inUse[classifier.ClassInteractive] == 0 {
			s.wakeCapacity()
		}
		return
	}
	c := s.callers[w.share.Caller]
	if c == nil {
		c = &callerShare{name: w.share.Caller, lists: map[string]*listShare{}}
		s.callers[w.share.Caller] = c
		s.wakeCapacity()
	}
	l := c.lists[w.share.List]
	if l == nil {
		l = &listShare{}
		c.lists[w.share.List] = l
	}
	l.waiting = append(l.waiting, w)
}

func (s *scheduler) wakeCapacity() {
	if s.poke != nil {
		s.poke()
	}
}

// dequeue removes w, which gave up before it was granted.
func (s *scheduler) dequeue(w *waiter) {
	if w.share.Class != classifier.ClassList {
		s.interactive = remove(s.interactive, w)
		s.countInteractive()
		return
	}
	l := s.callers[w.share.Caller].lists[w.share.List]
	l.waiting = remove(l.waiting, w)
	s.forget(w.share)
}

// forget drops the entries of a list and a caller that hold no slot and
// have no call waiting.
func (s *scheduler) forget(sh classifier.Share) {
	c := s.callers[sh.Caller]
	if l := c.lists[sh.List]; l.inUse == 0 && len(l.waiting) == 0 {
		delete(c.lists, sh.List)
	}
	if c.inUse == 0 && len(c.lists) == 0 {
		delete(s.callers, sh.Caller)
	}
}

func (s *scheduler) observe(c classifier.CallClass) {
	if s.obs != nil {
		s.obs.ObserveSlotsInUse(c, s.inUse[c])
	}
}

func remove(ws []*waiter, w *waiter) []*waiter {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}
