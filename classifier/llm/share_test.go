package llm

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db/dbtest"
)

// queue adds a waiting call of share sh, as acquire does, and returns it.
func queue(s *scheduler, sh classifier.Share) *waiter {
	w := &waiter{share: sh, since: time.Now(), ready: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueue(w)
	s.dispatch()
	return w
}

func granted(w *waiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

func unlimited(slots int) *scheduler {
	return newScheduler(slots, nil, nil)
}

func TestScheduler_InteractiveFirst(t *testing.T) {
	s := unlimited(1)
	a := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	first := queue(s, a)
	require.True(t, granted(first), "a free slot goes to whoever asks")

	listCall := queue(s, a)
	jobCall := queue(s, classifier.Share{Class: classifier.ClassInteractive})
	require.False(t, granted(listCall))
	require.False(t, granted(jobCall))

	s.release(a)
	require.True(t, granted(jobCall), "the interactive call, although it asked after the list's")
	require.False(t, granted(listCall))
	s.release(classifier.Share{Class: classifier.ClassInteractive})
	require.True(t, granted(listCall), "lists get every slot no interactive call wants")
}

// Callers' lists hold equal shares of the slots, whatever how many calls
// each has waiting and whoever came first; a caller's two lists split that
// caller's share.
func TestScheduler_CallersShareEvenly(t *testing.T) {
	s := unlimited(12)
	a1 := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	a2 := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a2"}
	b1 := classifier.Share{Class: classifier.ClassList, Caller: "b", List: "b1"}
	var calls []*waiter // in the order they asked
	for i := 0; i < 12; i++ {
		calls = append(calls, queue(s, a1)) // a1 came first and took every slot
	}
	for i := 0; i < 100; i++ {
		calls = append(calls, queue(s, a1), queue(s, a2), queue(s, b1))
	}
	// running holds the calls granted a slot, in the order they were: every
	// call takes as long, so the one granted first ends first.
	var running []*waiter
	track := func() {
		for k := 0; k < len(calls); k++ {
			if w := calls[k]; granted(w) {
				running = append(running, w)
				calls = append(calls[:k], calls[k+1:]...)
				k--
			}
		}
	}
	track()
	endOldest := func() string {
		w := running[0]
		running = running[1:]
		s.release(w.share)
		track()
		return w.share.List
	}
	inUse := func() map[string]int {
		m := map[string]int{}
		for _, w := range running {
			m[w.share.List]++
		}
		return m
	}
	require.Equal(t, map[string]int{"a1": 12}, inUse())

	for i := 0; i < 12; i++ { // a1's first calls end, one by one
		endOldest()
	}
	require.Equal(t, map[string]int{"a1": 3, "a2": 3, "b1": 6}, inUse(),
		"caller b holds half the slots; caller a's two lists split the other half")

	served := map[string]int{}
	for i := 0; i < 120; i++ {
		served[endOldest()]++
	}
	require.Equal(t, map[string]int{"a1": 30, "a2": 30, "b1": 60}, served, "calls answered in steady state")
	require.Equal(t, map[string]int{"a1": 3, "a2": 3, "b1": 6}, inUse())
}

func TestScheduler_GivingUpFreesNothingAndLeaksNothing(t *testing.T) {
	s := unlimited(1)
	a := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	release, err := s.acquire(context.Background(), a, 0)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.acquire(ctx, classifier.Share{Class: classifier.ClassList, Caller: "b", List: "b1"}, 0)
	require.ErrorIs(t, err, context.Canceled)
	s.mu.Lock()
	require.NotContains(t, s.callers, "b", "the caller that gave up is forgotten")
	s.mu.Unlock()

	release()
	release() // twice is once
	for i := 0; i < 3; i++ {
		r, err := s.acquire(context.Background(), a, 0)
		require.NoError(t, err, "call %d", i)
		r()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, 0, s.busy)
	require.Empty(t, s.callers)
	require.Zero(t, s.inUse[classifier.ClassList])
}

// recorder notes the class of every slot granted, in order (the scheduler
// reports slots in use under its lock).
type recorder struct {
	grants []classifier.CallClass
	inUse  map[classifier.CallClass]int
}

func (r *recorder) ObserveSlotsInUse(c classifier.CallClass, n int) {
	if n > r.inUse[c] {
		r.grants = append(r.grants, c)
	}
	r.inUse[c] = n
}

func (r *recorder) ObserveSlotWait(classifier.CallClass, time.Duration) {}

// The rate is taken in the same turn as the slot: list calls waiting for
// the rate do not hold slots, and an interactive call that arrives while
// they wait goes first.
func TestScheduler_RateInTurn(t *testing.T) {
	rec := &recorder{inUse: map[classifier.CallClass]int{}}
	s := newScheduler(10, newBucket(1.0/3600, 1, time.Now()), rec)
	ctx := context.Background()
	list := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	release, err := s.acquire(ctx, list, 0) // the bucket's one token
	require.NoError(t, err)
	defer release()

	done := make(chan classifier.CallClass, 2)
	go func() { r, _ := s.acquire(ctx, list, 0); r(); done <- classifier.ClassList }()
	waitQueued(t, s, 1)
	go func() {
		r, _ := s.acquire(ctx, classifier.Share{Class: classifier.ClassInteractive}, 0)
		r()
		done <- classifier.ClassInteractive
	}()
	waitQueued(t, s, 2)
	s.mu.Lock()
	require.Equal(t, 1, s.busy, "calls waiting for the rate hold no slot")
	s.requests = nil // the next tokens are due now
	s.dispatch()
	s.mu.Unlock()
	<-done
	<-done
	require.Equal(t, []classifier.CallClass{classifier.ClassList, classifier.ClassInteractive, classifier.ClassList}, rec.grants,
		"the interactive call got the first token after the list's first call, before the list's second")
}

// waitQueued waits until n calls wait in s, the way acquire leaves them.
func waitQueued(t *testing.T, s *scheduler, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		q := len(s.interactive)
		for _, c := range s.callers {
			for _, l := range c.lists {
				q += len(l.waiting)
			}
		}
		s.mu.Unlock()
		if q == n {
			return
		}
		runtime.Gosched()
	}
}

// The deployment's capacity weighs callers whose lists also run elsewhere
// less: slots go in proportion to the weights.
func TestScheduler_WeightsSplitCallersSlots(t *testing.T) {
	s := unlimited(0)
	x := classifier.Share{Class: classifier.ClassList, Caller: "x", List: "x1"}
	y := classifier.Share{Class: classifier.ClassList, Caller: "y", List: "y1"}
	var xs, ys []*waiter
	for range 6 {
		xs, ys = append(xs, queue(s, x)), append(ys, queue(s, y))
	}
	s.setLimits(limits{slots: 6, requestsPerSec: math.Inf(1), tokensPerSec: math.Inf(1), weights: map[string]float64{"x": 0.5, "y": 1.5}})
	count := func(ws []*waiter) (n int) {
		for _, w := range ws {
			if granted(w) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, count(xs))
	require.Equal(t, 4, count(ys), "y weighs three times x")
}

// A call's tokens are taken before it starts, and its usage corrects them
// after: a call that used less gives the rest back to the next.
func TestScheduler_TokensBindAndAreCorrected(t *testing.T) {
	s := unlimited(0)
	s.setLimits(limits{slots: 10, requestsPerSec: math.Inf(1), tokensPerSec: 1e-9, tokensBurst: 1000})
	require.Zero(t, s.tokens.level, "a capacity's new bucket starts empty")
	s.mu.Lock()
	s.tokens.level = 1000 // as if it had filled
	s.mu.Unlock()
	a := &waiter{share: classifier.Share{Class: classifier.ClassInteractive}, tokens: 400, ready: make(chan struct{})}
	b := &waiter{share: classifier.Share{Class: classifier.ClassInteractive}, tokens: 400, ready: make(chan struct{})}
	c := &waiter{share: classifier.Share{Class: classifier.ClassInteractive}, tokens: 400, ready: make(chan struct{})}
	for _, w := range []*waiter{a, b, c} {
		s.mu.Lock()
		s.enqueue(w)
		s.dispatch()
		s.mu.Unlock()
	}
	require.True(t, granted(a) && granted(b))
	require.False(t, granted(c), "1,000 tokens hold two calls of 400")
	s.correct(-300) // a used 100
	require.True(t, granted(c))
}

// No call starts before a cool-down ends, and the first waiting starts
// once it does.
func TestScheduler_NothingStartsBeforeACooldown(t *testing.T) {
	s := unlimited(4)
	until := time.Now().Add(100 * time.Millisecond)
	s.setLimits(limits{slots: 4, requestsPerSec: math.Inf(1), tokensPerSec: math.Inf(1), cooldown: until})
	w := queue(s, classifier.Share{Class: classifier.ClassInteractive})
	require.False(t, granted(w))
	<-w.ready
	require.False(t, time.Now().Before(until))
}

// A process that stops refuses the calls still waiting (their domains go
// back, ErrBusy) and every call asked after, while those in flight go on.
func TestScheduler_StopRefusesWhatHasNotStarted(t *testing.T) {
	s := unlimited(1)
	ctx := context.Background()
	inFlight, err := s.acquire(ctx, classifier.Share{Class: classifier.ClassInteractive}, 0)
	require.NoError(t, err)
	errs := make(chan error, 2)
	go func() {
		_, err := s.acquire(ctx, classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}, 0)
		errs <- err
	}()
	go func() { _, err := s.acquire(ctx, classifier.Share{Class: classifier.ClassInteractive}, 0); errs <- err }()
	waitQueued(t, s, 2)
	s.stop()
	for range 2 {
		err := <-errs
		require.ErrorIs(t, err, ErrStopping)
		require.ErrorIs(t, err, classifier.ErrBusy, "the domain is given back, the job snoozes")
	}
	_, err = s.acquire(ctx, classifier.Share{Class: classifier.ClassInteractive}, 0)
	require.ErrorIs(t, err, ErrStopping)
	inFlight()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Zero(t, s.busy)
	require.Empty(t, s.callers)
}

// List calls leave the reserve in the buckets: the calls of a job that
// arrives at a process whose lists keep its share busy start at once, up
// to the reserve, instead of one at a time at the share's pace.
func TestScheduler_ListsLeaveTheReserveForInteractiveCalls(t *testing.T) {
	s := unlimited(0)
	s.setLimits(limits{slots: 20, requestsPerSec: 1e-9, tokensPerSec: 1e-9, tokensBurst: 100, reserve: [2]float64{5, 500}})
	s.mu.Lock()
	require.InDelta(t, 6, s.requests.capacity, 1e-9, "a request, and the reserve")
	require.InDelta(t, 600, s.tokens.capacity, 1e-9, "a second's tokens, and the reserve")
	s.requests.level, s.tokens.level = 6, 600 // as if it had filled
	s.mu.Unlock()

	list := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	call := func(sh classifier.Share) *waiter {
		w := &waiter{share: sh, tokens: 100, since: time.Now(), ready: make(chan struct{})}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.enqueue(w)
		s.dispatch()
		return w
	}
	require.True(t, granted(call(list)), "what is above the reserve goes to lists")
	require.False(t, granted(call(list)), "a list call never takes the reserve")
	var job []*waiter
	for range 6 {
		job = append(job, call(classifier.Share{Class: classifier.ClassInteractive}))
	}
	for i, w := range job[:5] {
		require.True(t, granted(w), "interactive call %d starts at once", i+1)
	}
	require.False(t, granted(job[5]), "the reserve holds five")
}

// A bucket that shrinks (the deployment's interactive part fell) keeps what
// it holds for the next calls, and refills only up to its new size: the
// requests it held were the process's own, unused, and clipping them lost
// them for the deployment.
func TestBucket_ShrinkingKeepsWhatItHolds(t *testing.T) {
	now := time.Now()
	b := newBucket(1, 10, now)
	b.set(1, 4, now)
	for i := range 10 {
		require.Zero(t, b.wait(1), "request %d of the 10 held", i+1)
		b.take(1)
	}
	require.Positive(t, b.wait(1))
	b.refill(now.Add(time.Minute))
	require.InDelta(t, 4, b.level, 1e-9, "refilled to its new size only")
}

// Interactive calls that wait at a process (its bucket ran dry: a second
// job arrived before its share refilled it) are its demand at once, not
// after the moving mean catches up with them: the lease asks for what they
// need at the next renewal. Once none waits, the mean is the demand again.
func TestScheduler_InteractiveCallsWaitingAreDemandAtOnce(t *testing.T) {
	s := unlimited(0)
	s.setLimits(limits{slots: 20, requestsPerSec: 1e-9, tokensPerSec: math.Inf(1)})
	s.mu.Lock()
	s.requests.level = 1
	s.mu.Unlock()

	var job []*waiter
	for range 6 {
		job = append(job, queue(s, classifier.Share{Class: classifier.ClassInteractive}))
	}
	require.True(t, granted(job[0]))
	require.False(t, granted(job[1]), "the bucket held one request")
	interactive, _ := s.demand()
	require.InDelta(t, 6, interactive, 1e-9, "one call in flight and five waiting")

	s.mu.Lock()
	for _, w := range job[1:] {
		s.dequeue(w)
	}
	s.mu.Unlock()
	s.release(job[0].share)
	interactive, _ = s.demand()
	require.Less(t, interactive, 1.0, "none waits: the moving mean of a moment's calls")
}

// What the rate brings while the bucket is full is counted as unused (a
// share held with no call to spend it), and only that: what refills a
// bucket below its size, or arrives while a shrunk bucket is above it, is
// either kept or counted, never both.
func TestBucket_CountsWhatAFullBucketCannotHold(t *testing.T) {
	now := time.Now()
	b := newBucket(2, 10, now)
	b.take(6) // 4 left
	require.Zero(t, b.takeUnused(now.Add(2*time.Second)), "4 of room took the 4 that came")
	require.InDelta(t, 8, b.level, 1e-9)
	require.InDelta(t, 6, b.takeUnused(now.Add(6*time.Second)), 1e-9, "2 filled it, 6 had no room")
	require.InDelta(t, 10, b.level, 1e-9)
	require.Zero(t, b.takeUnused(now.Add(6*time.Second)), "counted once")

	b.set(2, 4, now.Add(6*time.Second)) // shrunk: it keeps its 10
	require.InDelta(t, 2, b.takeUnused(now.Add(7*time.Second)), 1e-9, "above its size, all that comes is unused")
	require.InDelta(t, 10, b.level, 1e-9)
}

// A process's bucket keeps its burst of requests for its own calls while
// none waits (a chunk ended and its next had not come): they start
// together once they come, and only what the bucket cannot hold is unused.
func TestScheduler_KeepsItsBurstForCallsThatComeLater(t *testing.T) {
	s := unlimited(0)
	s.setLimits(limits{slots: 100, requestsPerSec: 40, requestsBurst: 10, tokensPerSec: math.Inf(1)})
	s.mu.Lock()
	s.requests.last = s.requests.last.Add(-time.Second) // a second with no call
	s.mu.Unlock()

	list := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	var calls []*waiter
	for range 11 {
		calls = append(calls, queue(s, list))
	}
	for i, w := range calls[:10] {
		require.True(t, granted(w), "call %d of the burst starts at once", i+1)
	}
	require.False(t, granted(calls[10]), "the burst is 10")
	requests, _ := s.takeUnused()
	require.InDelta(t, 30, requests, 0.1, "of the 40 the second brought, the 10 kept were used")
}

// Two callers holding as many slots as each other are a tie, and ties
// take turns: not to the caller with more lists, whose two lists each hold
// fewer slots than the other caller's one, nor to the one whose call
// waited longer, which is the one asking more. With an odd number of
// slots, or a rate that grants a slot only after several ended, ties come
// often, and a caller's two lists won every one (3 of 5 slots for good;
// bench "fair": B ÷ A's two 0.80–0.85 with one, two and four processes).
func TestScheduler_TiesBetweenCallersTakeTurns(t *testing.T) {
	s := unlimited(5)
	a1 := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	a2 := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a2"}
	b1 := classifier.Share{Class: classifier.ClassList, Caller: "b", List: "b1"}
	var running []*waiter // granted, oldest first: every call takes as long
	var waiting []*waiter
	ask := func(sh classifier.Share) {
		w := queue(s, sh)
		waiting = append(waiting, w)
	}
	track := func() {
		for k := 0; k < len(waiting); k++ {
			if w := waiting[k]; granted(w) {
				running = append(running, w)
				waiting = append(waiting[:k], waiting[k+1:]...)
				k--
			}
		}
	}
	for range 5 {
		ask(a1)
		ask(a2)
		ask(b1)
	}
	track()
	served := map[string]int{}
	for range 1000 {
		w := running[0]
		running = running[1:]
		s.release(w.share)
		served[w.share.Caller]++
		ask(w.share) // each list always has calls waiting
		track()
	}
	require.InDelta(t, 1.0, float64(served["b"])/float64(served["a"]), 0.02,
		"callers even: a %d, b %d", served["a"], served["b"])
}

// List calls that take as long do not start together once slots free
// together: their starts spread over a call's length, so that a slot frees
// every few milliseconds for an interactive call that asks between two
// waves, and an interactive call starts at once on a slot the pace keeps
// from the lists.
func TestScheduler_ListCallsStartSpreadOverACallsLength(t *testing.T) {
	s := unlimited(8)
	list := classifier.Share{Class: classifier.ClassList, Caller: "a", List: "a1"}
	const held = 200 * time.Millisecond // a provider's steady latency
	var wave []*waiter
	for range 8 {
		wave = append(wave, queue(s, list))
	}
	for _, w := range wave {
		require.True(t, granted(w), "the first calls start as slots are free")
	}
	for range wave {
		s.releaseHeld(list, held) // the wave ends together
	}

	first := time.Now()
	wave = wave[:0]
	for range 8 {
		wave = append(wave, queue(s, list))
	}
	started := 0
	for _, w := range wave {
		if granted(w) {
			started++
		}
	}
	require.Equal(t, 1, started, "eight free slots, but the pace starts an eighth of them at once")
	job := classifier.Share{Class: classifier.ClassInteractive}
	require.True(t, granted(queue(s, job)), "an interactive call starts at once beside a paced list")
	s.release(job)

	// 1.25 × 8 slots ÷ 0.2 s: a start every 20 ms.
	require.Eventually(t, func() bool { return granted(wave[len(wave)-1]) }, dbtest.Patience(), time.Millisecond)
	require.GreaterOrEqual(t, time.Since(first), 7*held/10,
		"the other seven start over most of a call's length, not together")
}
