package spend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// A Set counts a set of caller's model calls against its daily
// budget in a few statements instead of two per call: Prepare reserves
// the calls the set expects in one statement, Reserve draws one of them
// with no Postgres, Settle adds each call's correction up in memory, and
// Flush, TakeCorrection or Close write it. It is exact as the per-call
// count is: a call is counted before it starts, and no call starts past
// the budget (what does not fit is refused as SpentReason).
//
// A list chunk uses one per run: Prepare(ctx, model, the fresh domains it
// claimed), the set as its calls' Spender (Reserve per call), Flush (or
// TakeCorrection into the transaction that stores a batch of answers) a
// few times a second, and Close at the run's end, which also gives back
// the prepared calls it did not make. After Close the set counts per call
// (as Spenders.For), so a call that outlives the run is still counted.
//
// Prepared calls are counted until drawn or given back: the caller's other
// work meanwhile sees them spent, and a process killed before Close
// leaves them counted for the day (never past the budget; at most a
// chunk's fresh domains early). Its counts are on the day they were
// reserved on: a set prepared before midnight UTC draws on the day before,
// as a call reserved then settles on it. A nil *Set counts nothing.
// It is safe for concurrent use.
type Set struct {
	s      *Spenders
	caller string

	mu      sync.Mutex
	poolDay time.Time // the day the prepared calls are counted on
	poolN   int       // prepared calls not drawn yet
	poolUSD float64   // what they are counted at together
	pending map[time.Time]spendCorrection
	closed  bool
}

// spendCorrection is what to add to a caller's count of one day.
type spendCorrection struct {
	calls int
	usd   float64
}

// Set returns a Set of caller's standard calls (nil when s is).
func (s *Spenders) Set(caller string) *Set {
	if s == nil {
		return nil
	}
	return &Set{s: s, caller: caller}
}

// Prepare reserves n calls of model for the set in one statement, each at
// the estimate a single call is counted at. As many as fit are reserved;
// when not all fit, the caller's budget is noted spent, so that the calls
// past them are refused without asking Postgres (for 5 s, as per call). It
// returns Postgres's errors; nothing is reserved then.
func (set *Set) Prepare(ctx context.Context, model string, n int) error {
	if set == nil || n <= 0 {
		return nil
	}
	s := set.s
	if s.refusedLately(set.caller) {
		return nil
	}
	s.mu.Lock()
	usd := s.estimate(model)
	s.mu.Unlock()
	day, granted, err := db.CallerSpendReserveMany(ctx, s.DB, set.caller, n, usd)
	if err != nil {
		return fmt.Errorf("error reserving %d model calls of %s: %w", n, set.caller, err)
	}
	if granted < n {
		s.refused(set.caller)
	}
	if granted == 0 {
		return nil
	}
	set.mu.Lock()
	if set.closed {
		// Prepared after Close: there is no run to draw them.
		set.mu.Unlock()
		s.add(set.caller, day, -granted, -float64(granted)*usd)
		return nil
	}
	if set.poolN > 0 && !set.poolDay.Equal(day) {
		// Prepared again past midnight: the calls left of the day before
		// are given back with the set's correction.
		set.correct(set.poolDay, -set.poolN, -set.poolUSD)
		set.poolN, set.poolUSD = 0, 0
	}
	set.poolDay = day
	set.poolN += granted
	set.poolUSD += float64(granted) * usd
	set.mu.Unlock()
	return nil
}

// Reserve implements classifier.Spender: it draws a prepared call, or,
// when none is left, counts one more as Spenders.For does (refused while
// the caller's budget is noted spent). After Close, every call is counted
// on its own.
func (set *Set) Reserve(ctx context.Context, model string) (classifier.Spend, error) {
	if set == nil {
		return noSpend{}, nil
	}
	set.mu.Lock()
	if set.closed {
		set.mu.Unlock()
		return set.s.For(set.caller).Reserve(ctx, model)
	}
	if set.poolN > 0 {
		usd := set.poolUSD / float64(set.poolN)
		if set.poolN == 1 {
			usd = set.poolUSD // the last one takes what rounding left
		}
		set.poolN--
		set.poolUSD -= usd
		day := set.poolDay
		set.mu.Unlock()
		return &setSpend{set: set, day: day, usd: usd}, nil
	}
	set.mu.Unlock()
	s := set.s
	s.mu.Lock()
	usd := s.estimate(model)
	s.mu.Unlock()
	day, err := s.reserveOne(ctx, set.caller, usd)
	if err != nil {
		return nil, err
	}
	return &setSpend{set: set, day: day, usd: usd}, nil
}

// Flush writes the corrections the set's calls added up so far, one
// statement a day (one, but around midnight UTC). On error they stay
// to be written by the next Flush or Close.
func (set *Set) Flush(ctx context.Context) error {
	if set == nil {
		return nil
	}
	set.mu.Lock()
	pending := set.pending
	set.pending = nil
	set.mu.Unlock()
	return set.write(ctx, pending)
}

// TakeCorrection hands the corrections added up so far over, to be
// written with CallerSpendAdd in the caller's own transaction (beside the
// answers they were made for); zero when there are none. It hands one day
// at a time, the oldest first: around midnight UTC, take again until it
// returns zero. Restore puts it back when that write failed.
func (set *Set) TakeCorrection() (day time.Time, calls int, usd float64) {
	if set == nil {
		return day, 0, 0
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	for d := range set.pending {
		if day.IsZero() || d.Before(day) {
			day = d
		}
	}
	if day.IsZero() {
		return day, 0, 0
	}
	c := set.pending[day]
	delete(set.pending, day)
	return day, c.calls, c.usd
}

// Restore puts back a correction TakeCorrection handed over whose write
// failed; after Close it is written on its own.
func (set *Set) Restore(day time.Time, calls int, usd float64) {
	if set == nil {
		return
	}
	set.mu.Lock()
	if set.closed {
		set.mu.Unlock()
		set.s.add(set.caller, day, calls, usd)
		return
	}
	set.correct(day, calls, usd)
	set.mu.Unlock()
}

// Close gives back the prepared calls not drawn and writes the set's
// corrections, one statement (two around midnight UTC). It may be called
// again: on error, that writes what is left; else it does nothing. From
// Close on, the set counts each call on its own, as Spenders.For does.
func (set *Set) Close(ctx context.Context) error {
	if set == nil {
		return nil
	}
	set.mu.Lock()
	set.closed = true
	if set.poolN > 0 {
		set.correct(set.poolDay, -set.poolN, -set.poolUSD)
		set.poolN, set.poolUSD = 0, 0
	}
	pending := set.pending
	set.pending = nil
	set.mu.Unlock()
	return set.write(ctx, pending)
}

// correct adds a correction of day to the set's. set.mu is held.
func (set *Set) correct(day time.Time, calls int, usd float64) {
	if calls == 0 && usd == 0 {
		return
	}
	if set.pending == nil {
		set.pending = map[time.Time]spendCorrection{}
	}
	c := set.pending[day]
	c.calls += calls
	c.usd += usd
	if c.calls == 0 && c.usd == 0 {
		delete(set.pending, day)
		return
	}
	set.pending[day] = c
}

// write writes pending, and puts back what it could not write.
func (set *Set) write(ctx context.Context, pending map[time.Time]spendCorrection) error {
	for day, c := range pending {
		if err := db.CallerSpendAdd(ctx, set.s.DB, set.caller, day, c.calls, c.usd); err != nil {
			set.mu.Lock()
			for day, c := range pending {
				set.correct(day, c.calls, c.usd)
			}
			set.mu.Unlock()
			return fmt.Errorf("error correcting the model spend of %s: %w", set.caller, err)
		}
		delete(pending, day)
	}
	return nil
}

// setSpend is one call of a Set.
type setSpend struct {
	set *Set
	day time.Time
	usd float64
}

// Settle implements classifier.Spend: the correction waits in the set,
// or, after Close, is written on its own.
func (sp *setSpend) Settle(u *classifier.Usage, model string, called bool) {
	set := sp.set
	calls, usd := set.s.correction(u, model, called, sp.usd)
	set.mu.Lock()
	if set.closed {
		set.mu.Unlock()
		set.s.add(set.caller, sp.day, calls, usd)
		return
	}
	set.correct(sp.day, calls, usd)
	set.mu.Unlock()
}

// noSpend is the call of a set that counts nothing.
type noSpend struct{}

func (noSpend) Settle(*classifier.Usage, string, bool) {}
