package jobs

import (
	"github.com/prometheus/client_golang/prometheus"
)

// BudgetMetrics show a worker process's part of the deployment's model
// budget (llm.BudgetObserver). A nil *BudgetMetrics records nothing.
type BudgetMetrics struct {
	share  prometheus.Gauge
	perMin *prometheus.GaugeVec
	slots  prometheus.Gauge
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
	}
	reg.MustRegister(m.share, m.perMin, m.slots)
	return m
}

// ObserveBudget records a lease (llm.BudgetObserver).
func (m *BudgetMetrics) ObserveBudget(share, requestsPerMinute, tokensPerMinute float64, slots int) {
	if m == nil {
		return
	}
	m.share.Set(share)
	m.perMin.WithLabelValues("requests").Set(requestsPerMinute)
	m.perMin.WithLabelValues("tokens").Set(tokensPerMinute)
	m.slots.Set(float64(slots))
}
