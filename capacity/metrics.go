package capacity

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics show a worker process's part of the deployment's model
// capacity (llm.CapacityObserver). A nil *Metrics records nothing.
type Metrics struct {
	share  prometheus.Gauge
	perMin *prometheus.GaugeVec
	slots  prometheus.Gauge
	unused *prometheus.CounterVec
	held   prometheus.Counter

	mu     sync.Mutex
	last   float64 // the share observed last, held since lastAt
	lastAt time.Time
}

// NewMetrics registers the capacity metrics on reg. They keep
// their names, domainclass_llm_budget_*, from before "budget" came to mean
// callers' money only (issue 38): dashboards and alerts use them.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		share: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "domainclass_llm_budget_share",
			Help: "The share of the provider account's requests and tokens a minute this worker process holds now (its lease); the processes' shares add up to at most 1.",
		}),
		perMin: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "domainclass_llm_budget_per_minute",
			Help: "What this worker process may use now, by kind (requests, tokens) a minute: its share of the account, within its own caps (+Inf: no limit).",
		}, []string{"kind"}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "domainclass_llm_budget_slots",
			Help: "Model calls this worker process may have in flight now: its share of LLM_ACCOUNT_CONCURRENCY, within LLM_MAX_CONCURRENCY when set (+Inf: no limit but the rate; 8 while no limit of the account is known).",
		}),
		unused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_llm_budget_unused_total",
			Help: "Requests and tokens (kind) of this worker process's share that it had no model call for while its bucket was full: held here, sent by no one.",
		}, []string{"kind"}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "domainclass_llm_budget_share_seconds_total",
			Help: "The share this worker process held, times the seconds it held it: its rate is the mean share, and the processes' rates add up to the part of the account leased (below 1 while shares move between processes).",
		}),
	}
	reg.MustRegister(m.share, m.perMin, m.slots, m.unused, m.held)
	return m
}

// ObserveCapacity records a lease (llm.CapacityObserver).
func (m *Metrics) ObserveCapacity(share, requestsPerMinute, tokensPerMinute float64, slots int) {
	if m == nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	if !m.lastAt.IsZero() {
		m.held.Add(m.last * now.Sub(m.lastAt).Seconds())
	}
	m.last, m.lastAt = share, now
	m.mu.Unlock()
	m.share.Set(share)
	m.perMin.WithLabelValues("requests").Set(requestsPerMinute)
	m.perMin.WithLabelValues("tokens").Set(tokensPerMinute)
	if slots < 0 {
		m.slots.Set(math.Inf(1))
	} else {
		m.slots.Set(float64(slots))
	}
}

// ObserveUnused counts what the process's share brought that it had no
// call for (llm.CapacityObserver).
func (m *Metrics) ObserveUnused(requests, tokens float64) {
	if m == nil {
		return
	}
	m.unused.WithLabelValues("requests").Add(requests)
	m.unused.WithLabelValues("tokens").Add(tokens)
}
