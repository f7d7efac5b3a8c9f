package jobs

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BudgetMetrics show a worker process's part of the deployment's model
// budget (llm.BudgetObserver). A nil *BudgetMetrics records nothing.
type BudgetMetrics struct {
	share  prometheus.Gauge
	perMin *prometheus.GaugeVec
	slots  prometheus.Gauge
	unused *prometheus.CounterVec
	held   prometheus.Counter

	mu     sync.Mutex
	last   float64 // the share observed last, held since lastAt
	lastAt time.Time
}

// NewBudgetMetrics registers the budget metrics on reg.
func NewBudgetMetrics(reg prometheus.Registerer) *BudgetMetrics {
	m := &BudgetMetrics{
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
			Help: "Model calls this worker process may have in flight now: its share of LLM_ACCOUNT_CONCURRENCY, within LLM_MAX_CONCURRENCY.",
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

// ObserveBudget records a lease (llm.BudgetObserver).
func (m *BudgetMetrics) ObserveBudget(share, requestsPerMinute, tokensPerMinute float64, slots int) {
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
	m.slots.Set(float64(slots))
}

// ObserveUnused counts what the process's share brought that it had no
// call for (llm.BudgetObserver).
func (m *BudgetMetrics) ObserveUnused(requests, tokens float64) {
	if m == nil {
		return
	}
	m.unused.WithLabelValues("requests").Add(requests)
	m.unused.WithLabelValues("tokens").Add(tokens)
}
