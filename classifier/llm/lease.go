package llm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// The reviewed settings of the deployment's capacity. Each is a decision
// with a reason; change one in a reviewed commit.
const (
	// DefaultLeaseRenew: a process renews its lease four times a second, so
	// that a share moves to where the calls wait within about half a
	// second (the one that gives it up renews, then the one that takes
	// it): an interactive job waits that long at most for the share its
	// calls need. 4 small transactions a second per process.
	DefaultLeaseRenew = 250 * time.Millisecond
	// DefaultLeaseTTL: a lease not renewed for 3 s (twelve renewals
	// missed: the process was killed, or cannot reach Postgres) expires,
	// and its share goes back to the others at their next renewal, well
	// within 10 s.
	DefaultLeaseTTL = 3 * time.Second
	// unlimitedRenew: with no limit known for the account, a lease only
	// carries the provider's throttles to the others; once a second is
	// soon enough for that, and costs the database less.
	unlimitedRenew = time.Second
	// renewGap is the least time between two renewals when new demand
	// arrives (an interactive call, a new caller).
	renewGap = 50 * time.Millisecond
	// Every 429 stops the calls for its wait. When a process gets
	// throttlesToLower of them within throttleWindow, the provider's limit
	// is lower than the capacity (another client on the key, a tier set
	// wrong), and the deployment's capacity drops to throttleFactor of what
	// it was (at most once per throttleDamp: a burst of 429s is one
	// signal), never below factorFloor, climbing back by a whole capacity per
	// factorRecover (from 0.8 to 1 in 12 s). A stray 429 of a capacity that
	// fits the account lowers nothing; a limit 20% too high settles into
	// short rounds of 429s and a lowered capacity.
	throttlesToLower = 3
	throttleWindow   = 10 * time.Second
	throttleFactor   = 0.8
	factorFloor      = 0.25
	factorRecover    = time.Minute
	throttleDamp     = 2 * time.Second
	// reserveWindow: a process's list calls leave a second of the
	// deployment's interactive calls' part of the account in its buckets,
	// for interactive calls that arrive there. A share moves between
	// processes at their renewals, a quarter of a second or more; without
	// the reserve a job that arrived at a process without one waited for
	// it to move, and the share it left when its calls ended sat unused
	// until the others' renewals (bench "fair", four processes: 84-90% of
	// the account in the jobs + list step). The reserve is the process's
	// own unused share, kept instead of lost: the provider's bucket, a
	// second of the account as OpenAI enforces it over short windows,
	// kept the same requests when the deployment did not send them.
	reserveWindow = time.Second
	// burstWindow: a process's bucket keeps a quarter of a second of its
	// share (DefaultLeaseRenew) for its calls, instead of one request.
	// List calls do not arrive evenly: a chunk's domains search before
	// they call the model, and a process's chunk ends before its next one
	// comes. With a burst of one, what the share brought while no call
	// waited was lost (bench "fair", four processes, jobs + list step: 2.3
	// to 2.6 requests a second of 60, most of the 5-7% below the account).
	// Kept, the processes send at most the account's rate over any second
	// plus a quarter of a second of it, which a provider enforcing a
	// second's window (OpenAI) has room for: the requests were not sent
	// while they were kept.
	burstWindow = 250 * time.Millisecond
)

// Account is a provider account's shared state as a lease renewal reads
// it: when calls may start again, the factor the provider's 429s lowered
// the capacity to and when, the limits its headers stated, and the
// database's clock.
type Account struct {
	CooldownUntil        time.Time
	Factor               float64
	FactorAt             time.Time
	StatedRPM, StatedTPM int
	Now                  time.Time
}

// factor is the capacity's factor at now: lowered by 429s, recovering with
// time.
func (a Account) factor(now time.Time) float64 {
	f := a.Factor
	if f <= 0 {
		f = 1
	}
	return math.Min(1, f+now.Sub(a.FactorAt).Seconds()/factorRecover.Seconds())
}

// LeaseStore holds the deployment's capacity (Postgres: capacity.AccountStore).
// Errors are the store's; a process that cannot renew keeps its lease
// until it expires, then holds an even share.
type LeaseStore interface {
	// Renew renews holder's lease for ttl: decide gets the account and the
	// other live leases, and returns the lease to write. Renewals of one
	// account run one at a time.
	Renew(ctx context.Context, holder string, ttl time.Duration, decide func(Account, []Lease) Lease) (Account, Lease, error)
	// Release gives holder's lease up.
	Release(ctx context.Context, holder string) error
	// Throttle records a 429: no call starts for wait, and, when lower is
	// set, the factor drops (see the constants above).
	Throttle(ctx context.Context, wait time.Duration, lower bool) error
	// Stated records the limits the provider's headers stated (0: not
	// stated).
	Stated(ctx context.Context, rpm, tpm int) error
}

// AccountOf names the provider account of a base URL and key: an id made
// from both (a hash: the key is never stored) and the URL's host, for
// people.
func AccountOf(baseURL, apiKey string) (id, name string) {
	sum := sha256.Sum256([]byte(baseURL + "\n" + apiKey))
	name = "api.openai.com"
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		name = u.Host
	}
	return hex.EncodeToString(sum[:16]), name
}

// CapacityConfig configures a process's part of the deployment's capacity.
type CapacityConfig struct {
	// RequestsPerMinute, TokensPerMinute and Concurrency are the account's
	// limits for the whole deployment (LLM_ACCOUNT_*); 0 is none (the
	// provider's stated limits still apply, and with none of either a
	// process holds DefaultMaxConcurrency calls at most).
	RequestsPerMinute, TokensPerMinute, Concurrency int
	// Holder names this process's lease; unique per process.
	Holder string
	// Renew and TTL: DefaultLeaseRenew and DefaultLeaseTTL when 0.
	Renew, TTL time.Duration
	Logger     *slog.Logger
	// Observer, when set, is told the process's lease after each renewal.
	Observer CapacityObserver
}

// CapacityObserver is told what a process may use of the deployment's
// capacity: its share, its requests and tokens a minute (+Inf: no limit)
// and its slots (-1: no limit); and, at each renewal, the requests and
// tokens of its share it had no call for since the last (they are gone:
// the rest of the deployment could have sent them).
type CapacityObserver interface {
	ObserveCapacity(share, requestsPerMinute, tokensPerMinute float64, slots int)
	ObserveUnused(requests, tokens float64)
}

// Capacity is a worker process's part of the deployment's model capacity
// (the account's limits, which every worker process shares): it leases a
// share of the provider account's requests, tokens and calls in flight
// from the LeaseStore, a few times a second, and bounds the
// process's Limited to it; and it hears what the provider says (a 429, the
// x-ratelimit headers) and tells the other processes through the store.
type Capacity struct {
	cfg   CapacityConfig
	store LeaseStore
	lim   *Limited
	wake  chan struct{}
	// throttling is set while a throttle is being written.
	throttling atomic.Bool

	mu          sync.Mutex
	acct        Account
	offset      time.Duration // the database's clock minus ours, at the last renewal
	lease       Lease
	weights     map[string]float64
	interactive float64   // the deployment's interactive calls' part of the account
	leaseUntil  time.Time // ours: when the lease runs out unless renewed
	holders     int       // the live leases at the last renewal, ours too
	cooldown    time.Time // ours: a wait the provider asked of this process
	stated      [2]int
	throttles   []time.Time // this process's recent 429s
	renewed     time.Time
	short       bool // holding less than allotted: others are giving it up
}

// NewCapacity returns a process's capacity over store. Govern makes it bound a
// Limited; Run renews its lease.
func NewCapacity(cfg CapacityConfig, store LeaseStore) *Capacity {
	if cfg.Renew <= 0 {
		cfg.Renew = DefaultLeaseRenew
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Capacity{cfg: cfg, store: store, wake: make(chan struct{}, 1), holders: 1,
		acct: Account{Factor: 1}}
}

// Govern makes b bound l: the deployment's capacity decides, and l's own
// concurrency and rate, when set, are caps within it.
// No call starts before the first renewal (milliseconds after Run
// starts): until then the process does not know what the others hold.
func (b *Capacity) Govern(l *Limited) {
	b.lim = l
	l.slots.mu.Lock()
	l.slots.poke = b.poke
	l.slots.slots = 0
	l.slots.mu.Unlock()
}

func (b *Capacity) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run renews the lease until ctx is done, then gives it up.
func (b *Capacity) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			if err := b.store.Release(rctx, b.cfg.Holder); err != nil {
				b.cfg.Logger.Warn("error giving the model capacity's lease up; it expires by itself", "error", err)
			}
			return
		case <-b.wake:
			if wait := renewGap - time.Since(b.renewed); wait > 0 {
				timer.Reset(wait)
				continue
			}
		case <-timer.C:
		}
		b.renew(ctx)
		timer.Reset(b.nextRenewal())
	}
}

// nextRenewal is the period, or sooner when this process holds less than
// it was allotted (the others are giving it up).
func (b *Capacity) nextRenewal() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.limits(time.Now()).limited():
		return max(b.cfg.Renew, unlimitedRenew)
	case b.short:
		return min(b.cfg.Renew, 2*renewGap)
	}
	return b.cfg.Renew
}

// renew renews the lease and applies it to the scheduler.
func (b *Capacity) renew(ctx context.Context) {
	d := b.demand()
	b.mu.Lock()
	stated := b.stated
	b.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, b.cfg.TTL/2)
	defer cancel()
	var (
		alloc   allocation
		holders int
	)
	start := time.Now()
	acct, lease, err := b.store.Renew(rctx, b.cfg.Holder, b.cfg.TTL, func(a Account, others []Lease) Lease {
		a = a.withStated(stated)
		alloc, holders = allocate(accountLimitsOf(b.cfg, a, a.Now), b.cfg.Holder, d, others), len(others)+1
		return Lease{Share: alloc.share, Slots: alloc.slots, Demand: d}
	})
	now := time.Now()
	b.mu.Lock()
	b.renewed = now
	switch {
	case err == nil:
		acct = acct.withStated(b.stated) // as heard now: a response may have stated them during the renewal
		b.acct, b.lease, b.weights, b.holders, b.interactive = acct, lease, alloc.weights, holders, alloc.interactive
		b.short = alloc.target > alloc.share+0.01
		b.offset = acct.Now.Sub(start.Add(now.Sub(start) / 2))
		b.leaseUntil = start.Add(b.cfg.TTL)
	case now.After(b.leaseUntil):
		// Postgres is out of reach and the lease has run out: the others
		// may hold it all by now. An even share of those last seen is what
		// they leave, once their own leases run out too.
		if ctx.Err() == nil {
			b.cfg.Logger.Warn("cannot renew the model capacity's lease; holding an even share", "error", err)
		}
		b.lease.Share = 1 / float64(max(b.holders, 1))
		if c := b.cfg.Concurrency; c > 0 {
			b.lease.Slots = max(1, c/max(b.holders, 1))
		}
	}
	l, share := b.schedulerLimits(now), b.lease.Share
	b.mu.Unlock()
	unusedRequests, unusedTokens := b.lim.slots.takeUnused()
	b.lim.slots.setLimits(l)
	if o := b.cfg.Observer; o != nil {
		slots := l.slots
		if slots == noSlotLimit {
			slots = -1
		}
		o.ObserveCapacity(share, l.requestsPerSec*60, l.tokensPerSec*60, slots)
		o.ObserveUnused(unusedRequests, unusedTokens)
	}
}

func (b *Capacity) demand() Demand {
	interactive, lists := b.lim.slots.demand()
	latency, tokens := b.lim.tokens.means()
	return Demand{Interactive: interactive, Lists: lists, MaxRate: float64(b.lim.perMinute) / 60,
		MaxSlots: b.lim.concurrency, Latency: latency, TokensPerCall: tokens}
}

// withStated is a with the limits this process heard the provider state
// (ours: 0, none) where the store has none yet: what a response said bounds
// the calls at once, not after its write and the next renewal.
func (a Account) withStated(ours [2]int) Account {
	a.StatedRPM, a.StatedTPM = cmp.Or(a.StatedRPM, ours[0]), cmp.Or(a.StatedTPM, ours[1])
	return a
}

// accountLimitsOf is the deployment's capacity: the configured limits, or the
// provider's stated ones when lower, times the factor 429s left.
func accountLimitsOf(cfg CapacityConfig, a Account, now time.Time) accountLimits {
	perSec := func(configured, stated int) float64 {
		m := math.Inf(1)
		for _, v := range []int{configured, stated} {
			if v > 0 {
				m = math.Min(m, float64(v))
			}
		}
		return m / 60 * a.factor(now)
	}
	return accountLimits{requests: perSec(cfg.RequestsPerMinute, a.StatedRPM), tokens: perSec(cfg.TokensPerMinute, a.StatedTPM),
		slots: cfg.Concurrency}
}

// limits is accountLimitsOf at now, on our clock. b.mu is held.
func (b *Capacity) limits(now time.Time) accountLimits {
	return accountLimitsOf(b.cfg, b.acct, now.Add(b.offset))
}

// schedulerLimits are the process's bounds: its share of the capacity, within
// its own caps when set. b.mu is held.
func (b *Capacity) schedulerLimits(now time.Time) limits {
	acct := b.limits(now)
	l := limits{slots: slotsOf(acct, b.lim.concurrency, b.lease.Slots), requestsPerSec: math.Inf(1), tokensPerSec: math.Inf(1),
		weights: b.weights, cooldown: b.cooldown}
	if b.lim.perMinute > 0 {
		l.requestsPerSec = float64(b.lim.perMinute) / 60
	}
	// Interactive calls wherever they arrive start at once, up to a second
	// of the deployment's interactive part (see reserveWindow).
	reserve := b.interactive * reserveWindow.Seconds()
	if shared := b.lease.Share * acct.requests; shared < l.requestsPerSec {
		l.requestsPerSec, l.reserve[0] = shared, reserve*acct.requests
		// A renewal's worth of the share: what the process's calls did not
		// take between two renewals (a chunk ended, its next had not come)
		// waits for them instead of being lost (see burstWindow).
		l.requestsBurst = shared * burstWindow.Seconds()
	}
	if !math.IsInf(acct.tokens, 1) {
		l.tokensPerSec = b.lease.Share * acct.tokens
		_, perCall := b.lim.tokens.means()
		// A second's worth, as the provider's own window holds, or one
		// call's when that is more (a call must fit to start).
		l.tokensBurst = math.Max(l.tokensPerSec, math.Max(perCall, defaultCompletionTokens))
		l.reserve[1] = reserve * acct.tokens
	}
	if shared := b.acct.CooldownUntil.Add(-b.offset); shared.After(l.cooldown) {
		l.cooldown = shared
	}
	return l
}

// slotsOf is a process's calls in flight: its lease's slots when the
// account limits them, within its own cap (0: not set); without a known
// limit of the account, its cap or DefaultMaxConcurrency; else only its cap,
// if any (the rate bounds the calls).
func slotsOf(acct accountLimits, own, leased int) int {
	switch {
	case acct.slots > 0 && own > 0:
		return min(own, leased)
	case acct.slots > 0:
		return leased
	case own > 0:
		return own
	case !acct.limited():
		return DefaultMaxConcurrency
	}
	return noSlotLimit
}

// LimitKnown reports whether a limit of the account is known: configured
// (CapacityConfig), or stated by the provider. Without one, the process
// holds at most its own cap, DefaultMaxConcurrency when not set, of calls
// in flight, and no rate but its own.
func (b *Capacity) LimitKnown() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limits(time.Now()).limited()
}

func (b *Capacity) write(msg string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.TTL)
	defer cancel()
	if err := fn(ctx); err != nil {
		b.cfg.Logger.Warn(msg, "error", err)
	}
}

// Share is the share of the account this process holds now.
func (b *Capacity) Share() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lease.Share
}
