package llm

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A deployment of processes that each could take the whole account.
func full(d Demand) Demand {
	d.MaxRate, d.MaxSlots, d.Latency = 20, 64, 0.3
	return d
}

// shares computes every holder's target as each would at its renewal.
func shares(lim accountLimits, demands map[string]Demand) map[string]allocation {
	out := map[string]allocation{}
	for h, d := range demands {
		var others []Lease
		for o, od := range demands {
			if o != h {
				others = append(others, Lease{Holder: o, Demand: od})
			}
		}
		out[h] = allocate(lim, h, d, others)
	}
	return out
}

var twenty = accountLimits{requests: 20, tokens: math.Inf(1)} // 1,200 a minute; 6 calls in flight at 0.3 s

func TestAllocate(t *testing.T) {
	t.Run("IdleProcessesShareEvenly", func(t *testing.T) {
		got := shares(twenty, map[string]Demand{"a": full(Demand{}), "b": full(Demand{}), "c": full(Demand{}), "d": full(Demand{})})
		for _, a := range got {
			require.InDelta(t, 0.25, a.target, 1e-9)
		}
	})

	t.Run("InteractiveCallsFirstWhereverTheyWait", func(t *testing.T) {
		lists := map[string]float64{"team-a": 200}
		got := shares(twenty, map[string]Demand{
			"a": full(Demand{Interactive: 3, Lists: lists}), // 3 calls of the 6 the account keeps in flight
			"b": full(Demand{Lists: lists}), "c": full(Demand{Lists: lists}), "d": full(Demand{Lists: lists}),
		})
		require.InDelta(t, 0.5+0.5/4, got["a"].target, 1e-9, "half for its job, and its list's quarter of the rest")
		require.InDelta(t, 0.125, got["b"].target, 1e-9)

		got = shares(twenty, map[string]Demand{"a": full(Demand{Interactive: 10}), "b": full(Demand{Lists: lists})})
		require.InDelta(t, 1, got["a"].target, 1e-9, "10 interactive calls want more than the account: all of it")
		require.Zero(t, got["b"].target)
	})

	t.Run("CallersEvenForTheDeployment", func(t *testing.T) {
		// x's lists run on both processes, y's on a only: y and x get half
		// each, x's half split between a and b.
		got := shares(twenty, map[string]Demand{
			"a": full(Demand{Lists: map[string]float64{"x": 50, "y": 50}}),
			"b": full(Demand{Lists: map[string]float64{"x": 50}}),
		})
		require.InDelta(t, 0.75, got["a"].target, 1e-9)
		require.InDelta(t, 0.25, got["b"].target, 1e-9)
		require.InDelta(t, 2, got["a"].weights["y"]/got["a"].weights["x"], 1e-9,
			"a's scheduler gives y twice x's slots: x has as much again on b")
	})

	t.Run("AProcessesOwnCapsLeaveTheRestToOthers", func(t *testing.T) {
		capped := full(Demand{Lists: map[string]float64{"x": 50}})
		capped.MaxRate = 5 // LLM_RATE_PER_MINUTE=300: a quarter of the account
		got := shares(twenty, map[string]Demand{"a": capped, "b": full(Demand{Lists: map[string]float64{"y": 50}})})
		require.InDelta(t, 0.25, got["a"].target, 1e-9)
		require.InDelta(t, 0.75, got["b"].target, 1e-9)
	})

	t.Run("NeverTakesWhatOthersHoldNow", func(t *testing.T) {
		busy := full(Demand{Lists: map[string]float64{"x": 50}})
		a := allocate(twenty, "b", busy, []Lease{{Holder: "a", Share: 0.9, Demand: busy}})
		require.InDelta(t, 0.5, a.target, 1e-9)
		require.InDelta(t, 0.1, a.share, 1e-9, "a gives its extra up at its next renewal")
	})

	t.Run("SlotsAddUpToTheAccounts", func(t *testing.T) {
		lim := twenty
		lim.slots = 6
		demands := map[string]Demand{"a": full(Demand{}), "b": full(Demand{}), "c": full(Demand{}), "d": full(Demand{})}
		total := 0
		for _, a := range shares(lim, demands) {
			require.GreaterOrEqual(t, a.slots, 1)
			total += a.slots
		}
		require.Equal(t, 6, total)
	})

	t.Run("WaterfillIsMaxMinFair", func(t *testing.T) {
		require.Equal(t, []float64{0.1, 0.45, 0.45}, waterfill(1, []float64{0.1, 0.9, 0.5}))
		require.Equal(t, []float64{0, 0.2, 0.3}, waterfill(1, []float64{0, 0.2, 0.3}))
	})
}

// storeFunc is a LeaseStore of functions: a fake at the seam, for the
// capacity's own rules.
type storeFunc struct {
	throttle func(wait time.Duration, lower bool)
	others   []Lease // the other processes' leases
}

func (s storeFunc) Renew(_ context.Context, holder string, _ time.Duration, decide func(Account, []Lease) Lease) (Account, Lease, error) {
	l := decide(Account{Factor: 1, Now: time.Now()}, s.others)
	l.Holder = holder
	return Account{Factor: 1, Now: time.Now()}, l, nil
}
func (storeFunc) Release(context.Context, string) error { return nil }
func (s storeFunc) Throttle(_ context.Context, wait time.Duration, lower bool) error {
	s.throttle(wait, lower)
	return nil
}
func (storeFunc) Stated(context.Context, int, int) error { return nil }

// A stray 429 stops the calls for its wait and lowers nothing; three
// within throttleWindow lower the capacity.
func TestCapacity_OnlyRepeated429sLowerTheCapacity(t *testing.T) {
	lowered := make(chan bool, 3)
	b := NewCapacity(CapacityConfig{RequestsPerMinute: 600, Holder: "p"}, storeFunc{throttle: func(_ time.Duration, lower bool) {
		lowered <- lower
	}})
	b.Govern(Limit(nil, 4, 600, nil))
	b.ProviderSaid(RateLimits{Throttled: true, RetryAfter: 50 * time.Millisecond, RemainingRequests: -1, RemainingTokens: -1})
	require.False(t, <-lowered, "a stray 429")
	require.Eventually(t, func() bool { return !b.throttling.Load() }, time.Second, time.Millisecond)
	b.ProviderSaid(RateLimits{Throttled: true, RetryAfter: 50 * time.Millisecond, RemainingRequests: -1, RemainingTokens: -1})
	require.False(t, <-lowered, "two")
	b.ProviderSaid(RateLimits{Throttled: true, RetryAfter: 50 * time.Millisecond, RemainingRequests: -1, RemainingTokens: -1})
	require.True(t, <-lowered, "three within the window, written even while another write runs")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.InDelta(t, throttleFactor, b.acct.Factor, 0.01)
	require.True(t, b.cooldown.After(time.Now()), "and every one of them stops the calls for its wait")
}

// A process keeps a second of the deployment's interactive calls in its
// bucket, wherever those calls wait now: a job that arrives here next
// starts its calls at once.
func TestCapacity_ReserveIsASecondOfTheDeploymentsInteractiveCalls(t *testing.T) {
	jobs := Lease{Holder: "q", Share: 0.5, Demand: full(Demand{Interactive: 3})} // half of the 6 calls the account keeps in flight
	b := NewCapacity(CapacityConfig{RequestsPerMinute: 1200, Holder: "p"}, storeFunc{others: []Lease{jobs}})
	l := Limit(nil, 16, 1_000_000, nil)
	b.Govern(l)
	b.renew(context.Background())
	l.slots.mu.Lock()
	defer l.slots.mu.Unlock()
	require.InDelta(t, 10, l.slots.reserve[0], 1e-9, "half of 20 requests a second, for a second")
	require.InDelta(t, 10+math.Max(1, l.slots.requests.perSec*burstWindow.Seconds()), l.slots.requests.capacity, 1e-9,
		"and a quarter of a second of its own share for its own calls")
	require.Less(t, l.slots.requests.perSec, 20.0, "the rate is still the process's share")
}

// One limiter (issue 38): the deployment's capacity decides, and a
// process's own caps are off unless set. With no limit of the account
// known a process holds DefaultMaxConcurrency calls; once the provider
// states one (or one is configured), the lease alone bounds the calls.
func TestCapacity_TheLeaseDecidesAndOwnCapsAreOffUnlessSet(t *testing.T) {
	bounds := func(cfg CapacityConfig, concurrency, perMinute int, said *RateLimits) (slots int, perSec float64, known bool) {
		cfg.Holder = "p"
		b := NewCapacity(cfg, storeFunc{})
		l := Limit(nil, concurrency, perMinute, nil)
		b.Govern(l)
		b.renew(context.Background())
		if said != nil {
			b.ProviderSaid(*said)
			b.renew(context.Background()) // the store has not recorded it yet: what was heard holds
		}
		l.slots.mu.Lock()
		defer l.slots.mu.Unlock()
		perSec = math.Inf(1)
		if l.slots.requests != nil {
			perSec = l.slots.requests.perSec
		}
		return l.slots.slots, perSec, b.LimitKnown()
	}
	stated := &RateLimits{LimitRequests: 6000, RemainingRequests: -1, RemainingTokens: -1}
	for _, tc := range []struct {
		name              string
		cfg               CapacityConfig
		concurrency, rate int
		said              *RateLimits
		slots             int
		perSec            float64
		known             bool
	}{
		{"NothingKnown", CapacityConfig{}, 0, 0, nil, DefaultMaxConcurrency, math.Inf(1), false},
		{"NothingKnownOwnCapSet", CapacityConfig{}, 32, 0, nil, 32, math.Inf(1), false},
		{"StatedByTheProvider", CapacityConfig{}, 0, 0, stated, noSlotLimit, 100, true},
		{"Configured", CapacityConfig{RequestsPerMinute: 1200}, 0, 0, nil, noSlotLimit, 20, true},
		{"ConfiguredCallsInFlight", CapacityConfig{Concurrency: 20}, 0, 0, nil, 20, math.Inf(1), true},
		// 4 of the 20 calls the account keeps in flight: a share of 0.2.
		{"OwnCapsWithin", CapacityConfig{RequestsPerMinute: 1200, Concurrency: 20}, 4, 600, nil, 4, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slots, perSec, known := bounds(tc.cfg, tc.concurrency, tc.rate, tc.said)
			require.Equal(t, []any{tc.slots, tc.known}, []any{slots, known})
			require.InDelta(t, tc.perSec, perSec, 1e-9)
		})
	}
}
