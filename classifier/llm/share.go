package llm

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Class is who a model call serves, for the order in which calls get a
// model slot: every waiting interactive call before any list's.
type Class string

const (
	// ClassInteractive: a job of POST /domains/classify, whose caller is
	// waiting for ten answers. The default for a call without a Share.
	ClassInteractive Class = "interactive"
	// ClassList: a row of a list.
	ClassList Class = "list"
)

// Classes lists every class, in the order they are served.
func Classes() []Class { return []Class{ClassInteractive, ClassList} }

// A Share names whose a model call is: its class and, for a list, the
// caller and the list.
type Share struct {
	Class  Class
	Caller string
	List   string
}

type shareKey struct{}

// WithShare returns ctx with the share of the model calls made under it.
func WithShare(ctx context.Context, s Share) context.Context {
	return context.WithValue(ctx, shareKey{}, s)
}

// ShareOf returns ctx's share: interactive when none was set.
func ShareOf(ctx context.Context) Share {
	if s, ok := ctx.Value(shareKey{}).(Share); ok && s.Class != "" {
		return s
	}
	return Share{Class: ClassInteractive}
}

// SlotObserver is told how many slots each class holds whenever that
// changes, and how long each call waited for its slot.
type SlotObserver interface {
	ObserveSlotsInUse(c Class, n int)
	ObserveSlotWait(c Class, d time.Duration)
}

// scheduler hands out a process's model slots and its rate, a slot at a
// time as one frees, in this order:
//
//  1. interactive calls, first come first served;
//  2. list calls: to the caller holding the fewest slots among those
//     waiting, and within that caller to its list holding the fewest.
//
// So lists take every slot no interactive call wants, an interactive call
// waits only for the next slot to free (never behind a list's queue), and
// callers' lists hold equal shares of the rest whatever their sizes: a
// caller's second list splits that caller's share instead of adding one.
// Nothing is preempted: a call keeps its slot until it returns.
type scheduler struct {
	rate *rate.Limiter
	obs  SlotObserver

	mu          sync.Mutex
	free        int
	inUse       map[Class]int
	interactive []*waiter
	callers     map[string]*callerShare
	timer       *time.Timer // set while waiting for the rate
}

type waiter struct {
	share   Share
	since   time.Time
	ready   chan struct{} // closed when granted
	granted bool
}

type callerShare struct {
	inUse int
	lists map[string]*listShare
}

type listShare struct {
	inUse   int
	waiting []*waiter
}

func newScheduler(slots int, lim *rate.Limiter, obs SlotObserver) *scheduler {
	return &scheduler{rate: lim, obs: obs, free: slots, inUse: map[Class]int{}, callers: map[string]*callerShare{}}
}

// acquire waits for a slot and a rate token for a call of share s, and
// returns the slot's release.
func (s *scheduler) acquire(ctx context.Context, sh Share) (release func(), err error) {
	w := &waiter{share: sh, since: time.Now(), ready: make(chan struct{})}
	s.mu.Lock()
	s.enqueue(w)
	s.dispatch()
	s.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		granted := w.granted
		if !granted {
			s.dequeue(w)
		}
		s.mu.Unlock()
		if granted {
			s.release(sh)
		}
		return nil, ctx.Err()
	}
	if s.obs != nil {
		s.obs.ObserveSlotWait(sh.Class, time.Since(w.since))
	}
	var once sync.Once
	return func() { once.Do(func() { s.release(sh) }) }, nil
}

func (s *scheduler) release(sh Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	s.inUse[sh.Class]--
	if sh.Class == ClassList {
		c := s.callers[sh.Caller]
		c.inUse--
		c.lists[sh.List].inUse--
		s.forget(sh)
	}
	s.observe(sh.Class)
	s.dispatch()
}

func (s *scheduler) enqueue(w *waiter) {
	if w.share.Class != ClassList {
		s.interactive = append(s.interactive, w)
		return
	}
	c := s.callers[w.share.Caller]
	if c == nil {
		c = &callerShare{lists: map[string]*listShare{}}
		s.callers[w.share.Caller] = c
	}
	l := c.lists[w.share.List]
	if l == nil {
		l = &listShare{}
		c.lists[w.share.List] = l
	}
	l.waiting = append(l.waiting, w)
}

// dequeue removes w, which gave up before it was granted.
func (s *scheduler) dequeue(w *waiter) {
	if w.share.Class != ClassList {
		s.interactive = remove(s.interactive, w)
		return
	}
	l := s.callers[w.share.Caller].lists[w.share.List]
	l.waiting = remove(l.waiting, w)
	s.forget(w.share)
}

// forget drops the entries of a list and a caller that hold no slot and
// have no call waiting.
func (s *scheduler) forget(sh Share) {
	c := s.callers[sh.Caller]
	if l := c.lists[sh.List]; l.inUse == 0 && len(l.waiting) == 0 {
		delete(c.lists, sh.List)
	}
	if c.inUse == 0 && len(c.lists) == 0 {
		delete(s.callers, sh.Caller)
	}
}

// dispatch grants free slots to waiting calls while the rate allows; when
// it does not, a timer calls dispatch again once it will.
func (s *scheduler) dispatch() {
	for s.free > 0 {
		w := s.next(false)
		if w == nil {
			return
		}
		if !s.rate.Allow() {
			s.waitForRate()
			return
		}
		s.next(true)
		s.free--
		s.inUse[w.share.Class]++
		if w.share.Class == ClassList {
			c := s.callers[w.share.Caller]
			c.inUse++
			c.lists[w.share.List].inUse++
		}
		w.granted = true
		close(w.ready)
		s.observe(w.share.Class)
	}
}

func (s *scheduler) waitForRate() {
	if s.timer != nil {
		return
	}
	wait := time.Duration((1 - s.rate.Tokens()) / float64(s.rate.Limit()) * float64(time.Second))
	s.timer = time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		s.dispatch()
	})
}

// next returns the call to serve next, and takes it out of its queue when
// take is set; nil when none waits.
func (s *scheduler) next(take bool) *waiter {
	if len(s.interactive) > 0 {
		w := s.interactive[0]
		if take {
			s.interactive = s.interactive[1:]
		}
		return w
	}
	var (
		best  *listShare
		bestC *callerShare
	)
	for _, c := range s.callers {
		for _, l := range c.lists {
			if len(l.waiting) == 0 {
				continue
			}
			if best == nil || before(c, l, bestC, best) {
				best, bestC = l, c
			}
		}
	}
	if best == nil {
		return nil
	}
	w := best.waiting[0]
	if take {
		best.waiting = best.waiting[1:]
	}
	return w
}

// before reports whether list l of caller c is served before list bl of
// caller bc: the caller holding fewer slots first, then, within a caller
// or between equals, the list holding fewer, then the one waiting longer.
func before(c *callerShare, l *listShare, bc *callerShare, bl *listShare) bool {
	if c.inUse != bc.inUse {
		return c.inUse < bc.inUse
	}
	if l.inUse != bl.inUse {
		return l.inUse < bl.inUse
	}
	return l.waiting[0].since.Before(bl.waiting[0].since)
}

func (s *scheduler) observe(c Class) {
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
