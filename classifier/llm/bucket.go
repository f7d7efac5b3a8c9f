package llm

import (
	"math"
	"time"
)

// bucket is a token bucket whose rate and size change as the deployment's
// capacity moves, and whose level can go below zero: a call whose tokens
// turned out more than estimated pays the difference from the tokens to
// come. A nil *bucket is no limit.
type bucket struct {
	perSec   float64
	capacity float64
	level    float64
	last     time.Time
	// unused is what the rate brought while the bucket was full: a share
	// held with no call to spend it, gone.
	unused float64
}

func newBucket(perSec, capacity float64, now time.Time) *bucket {
	return &bucket{perSec: perSec, capacity: capacity, level: capacity, last: now}
}

func (b *bucket) refill(now time.Time) {
	if b == nil || !now.After(b.last) {
		return
	}
	add := now.Sub(b.last).Seconds() * b.perSec
	b.last = now
	if room := math.Max(0, b.capacity-b.level); add > room {
		b.unused += add - room
		add = room
	}
	b.level += add
}

// takeUnused returns what the rate brought while the bucket was full, up
// to now, and starts counting again.
func (b *bucket) takeUnused(now time.Time) float64 {
	if b == nil {
		return 0
	}
	b.refill(now)
	u := b.unused
	b.unused = 0
	return u
}

// fit is n as the bucket can ever hold it: a request larger than the
// bucket is let through once the bucket is full.
func (b *bucket) fit(n float64) float64 { return math.Min(n, b.capacity) }

// wait is how long until n fit, after a refill; 0 when they fit now, and
// forever when the rate is 0.
func (b *bucket) wait(n float64) time.Duration {
	if b == nil || b.level >= b.fit(n) {
		return 0
	}
	secs := (b.fit(n) - b.level) / b.perSec
	if b.perSec <= 0 || secs > 24*3600 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(secs * float64(time.Second))
}

func (b *bucket) take(n float64) {
	if b != nil {
		b.level -= n
	}
}

// give puts n back (a call used fewer than it took): up to the bucket's
// size, as a refill does; a bucket above its size (it shrank) keeps its
// level.
func (b *bucket) give(n float64) {
	b.level = math.Min(math.Max(b.capacity, b.level), b.level+n)
}

// set changes the rate and size from now on, keeping the level: a bucket
// that shrinks keeps what it holds for the next calls, and refills only
// once they took it below its new size.
func (b *bucket) set(perSec, capacity float64, now time.Time) {
	b.refill(now)
	b.perSec, b.capacity = perSec, capacity
}
