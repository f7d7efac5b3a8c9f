package llm

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// Demand is what a worker process asks of the deployment's capacity, as its
// lease records it: its model calls in flight and waiting (interactive,
// and lists by caller), its own caps, and what its calls take.
type Demand struct {
	Interactive float64            `json:"i,omitempty"`
	Lists       map[string]float64 `json:"l,omitempty"`
	// MaxRate (requests a second) and MaxSlots are the process's own caps
	// (LLM_RATE_PER_MINUTE, LLM_MAX_CONCURRENCY); 0 is not set.
	MaxRate  float64 `json:"r"`
	MaxSlots int     `json:"c"`
	// Latency is the mean time of its recent calls, in seconds, and
	// TokensPerCall their mean tokens (0: none measured yet).
	Latency       float64 `json:"t,omitempty"`
	TokensPerCall float64 `json:"k,omitempty"`
}

// Lease is a worker process's lease on the deployment's capacity: its share
// of the account's requests and tokens a minute, and of its calls in
// flight (Slots; 0 when the account has no such limit).
type Lease struct {
	Holder string
	Share  float64
	Slots  int
	Demand Demand
}

// accountLimits is the deployment's capacity now: requests and tokens a
// second (+Inf: no limit) and calls in flight (0: no limit).
type accountLimits struct {
	requests, tokens float64
	slots            int
}

func (a accountLimits) limited() bool {
	return !math.IsInf(a.requests, 1) || !math.IsInf(a.tokens, 1) || a.slots > 0
}

// Defaults of an allocation before any call was measured.
const (
	defaultLatency       = 1.0 // seconds
	defaultTokensPerCall = typicalRequestTokens
)

// allocation is a holder's part: its share (what it may hold now) and its
// target (what it is allotted, once the others give theirs up), its slots
// (0 when the account does not limit calls in flight), and the weights of
// its list callers for its scheduler.
type allocation struct {
	share, target float64
	// interactive is the part of the account the deployment's interactive
	// calls take, wherever they wait.
	interactive float64
	slots       int
	weights     map[string]float64
}

// grant is one holder's part of an allocation, as it is made.
type grant struct {
	share   float64            // of the account
	lists   map[string]float64 // of which, for each list caller
	capLeft float64
}

// allocate decides the share of the account that holder should hold, as
// every holder computes it from the same leases: interactive calls first,
// wherever they wait; then list callers evenly for the whole deployment,
// each caller's part split among the processes where its lists run; then
// what nobody asked for, evenly. Demand counts calls, and a share is what
// keeps that many calls in flight at the account's pace (Little's law: the
// account sustains requests × latency calls in flight). No holder gets
// more than its own caps use.
//
// The share never takes what other holders hold now: a holder whose share
// shrinks gives it up at its own next renewal, and the others take it at
// theirs.
func allocate(lim accountLimits, holder string, mine Demand, others []Lease) allocation {
	hs := append(slices.Clone(others), Lease{Holder: holder, Demand: mine})
	sort.Slice(hs, func(i, j int) bool { return hs[i].Holder < hs[j].Holder })
	capacity := callCapacity(lim, hs)
	grants := make([]grant, len(hs))
	for i, h := range hs {
		grants[i] = grant{lists: map[string]float64{}, capLeft: holderCap(lim, capacity, h.Demand)}
	}

	// 1. Interactive calls, wherever they are.
	need := make([]float64, len(hs))
	for i, h := range hs {
		need[i] = math.Min(h.Demand.Interactive/capacity, grants[i].capLeft)
	}
	interactive := 0.0
	for i, g := range waterfill(1, need) {
		grants[i].share += g
		grants[i].capLeft -= g
		interactive += g
	}
	// 2. List callers evenly, each one's part among its holders.
	byCaller := map[string][]float64{}
	for i, h := range hs {
		for c, n := range h.Demand.Lists {
			if byCaller[c] == nil {
				byCaller[c] = make([]float64, len(hs))
			}
			byCaller[c][i] = n / capacity
		}
	}
	callers := make([]string, 0, len(byCaller))
	for c := range byCaller {
		callers = append(callers, c)
	}
	sort.Strings(callers)
	callerNeed := make([]float64, len(callers))
	for k, c := range callers {
		for i, n := range byCaller[c] {
			callerNeed[k] += math.Min(n, grants[i].capLeft)
		}
	}
	for k, part := range waterfill(1-total(grants), callerNeed) {
		c := callers[k]
		holderNeed := make([]float64, len(hs))
		for i, n := range byCaller[c] {
			holderNeed[i] = math.Min(n, grants[i].capLeft)
		}
		for i, g := range waterfill(part, holderNeed) {
			grants[i].share += g
			grants[i].lists[c] += g
			grants[i].capLeft -= g
		}
	}
	// 3. What is left, evenly, so that an idle process has some at once.
	room := make([]float64, len(hs))
	for i := range grants {
		room[i] = grants[i].capLeft
	}
	for i, g := range waterfill(1-total(grants), room) {
		grants[i].share += g
	}

	me := slices.IndexFunc(hs, func(h Lease) bool { return h.Holder == holder })
	held := 0.0
	heldSlots := 0
	for _, o := range others {
		held += o.Share
		heldSlots += o.Slots
	}
	a := allocation{target: grants[me].share, interactive: interactive, weights: normalise(grants[me].lists)}
	a.share = math.Max(0, math.Min(a.target, 1-held))
	if lim.slots > 0 {
		a.slots = max(0, min(roundSlots(grants, lim.slots)[me], lim.slots-heldSlots))
	}
	return a
}

// callCapacity is how many calls in flight the account sustains: its rate
// times the calls' latency, at most its slots; without a rate or slots,
// what the holders' own caps allow (DefaultMaxConcurrency where not set).
func callCapacity(lim accountLimits, hs []Lease) float64 {
	sumLatency, sumTokens, n := 0.0, 0.0, 0.0
	sumSlots := 0.0
	for _, h := range hs {
		if h.Demand.Latency > 0 {
			sumLatency += h.Demand.Latency
			sumTokens += h.Demand.TokensPerCall
			n++
		}
		sumSlots += float64(cmp.Or(h.Demand.MaxSlots, DefaultMaxConcurrency))
	}
	latency, perCall := defaultLatency, float64(defaultTokensPerCall)
	if n > 0 {
		latency = sumLatency / n
		perCall = math.Max(1, sumTokens/n)
	}
	c := math.Min(lim.requests, lim.tokens/perCall) * latency
	if lim.slots > 0 {
		c = math.Min(c, float64(lim.slots))
	}
	if math.IsInf(c, 1) {
		c = sumSlots
	}
	return math.Max(c, 1)
}

// holderCap is the most of the account a holder's own caps can use.
func holderCap(lim accountLimits, capacity float64, d Demand) float64 {
	c := 1.0
	if !math.IsInf(lim.requests, 1) && d.MaxRate > 0 {
		c = math.Min(c, d.MaxRate/lim.requests)
	}
	if d.MaxSlots > 0 {
		c = math.Min(c, float64(d.MaxSlots)/capacity)
	}
	return c
}

// waterfill shares total among demands max-min fairly: none gets more
// than it asks, and what one does not need goes evenly to the others.
func waterfill(total float64, demands []float64) []float64 {
	out := make([]float64, len(demands))
	order := make([]int, 0, len(demands))
	for i, d := range demands {
		if d > 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return demands[order[a]] < demands[order[b]] })
	left := math.Max(total, 0)
	for k, i := range order {
		even := left / float64(len(order)-k)
		out[i] = math.Min(demands[i], even)
		left -= out[i]
	}
	return out
}

func total(gs []grant) float64 {
	t := 0.0
	for _, g := range gs {
		t += g.share
	}
	return t
}

// roundSlots turns the holders' shares of slots calls in flight into whole
// calls that add up to at most slots: each its whole part, then one more
// to the largest remainders.
func roundSlots(gs []grant, slots int) []int {
	out := make([]int, len(gs))
	order := make([]int, len(gs))
	used := 0
	for i, g := range gs {
		out[i] = int(g.share * float64(slots))
		used += out[i]
		order[i] = i
	}
	frac := func(i int) float64 { return gs[i].share*float64(slots) - float64(out[i]) }
	sort.SliceStable(order, func(a, b int) bool { return frac(order[a]) > frac(order[b]) })
	for _, i := range order {
		if used >= slots || frac(i) <= 0 {
			break
		}
		out[i]++
		used++
	}
	return out
}

// normalise scales weights to a mean of 1 (the weight of a caller the
// scheduler does not know yet), with a floor, so that no caller waiting
// here starves.
func normalise(parts map[string]float64) map[string]float64 {
	sum := 0.0
	for _, p := range parts {
		sum += p
	}
	if sum <= 0 {
		return nil
	}
	out := make(map[string]float64, len(parts))
	mean := sum / float64(len(parts))
	for c, p := range parts {
		out[c] = math.Max(p/mean, 0.05)
	}
	return out
}
