package capacity_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/capacity"
)

// The capacity's counters: a share held counts its seconds (the rate of
// domainclass_llm_budget_share_seconds_total is the mean share, which
// gauges sampled every 15 s cannot give for shares that move four times a
// second), and unused requests and tokens add up.
func TestCapacityMetrics_ShareSecondsAndUnused(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := capacity.NewMetrics(reg)
	held := func() float64 { return counter(t, reg, "domainclass_llm_budget_share_seconds_total", nil) }

	t0 := time.Now()
	m.ObserveCapacity(0.5, 600, 0, 4)
	t1 := time.Now()
	for time.Since(t1) < time.Millisecond { // time passes while the share is held (no sleep: a busy wait)
	}
	t2 := time.Now()
	m.ObserveCapacity(0, 0, 0, 0)
	t3 := time.Now()
	got := held()
	require.GreaterOrEqual(t, got, 0.5*t2.Sub(t1).Seconds(), "half the account for at least the time between the renewals")
	require.LessOrEqual(t, got, 0.5*t3.Sub(t0).Seconds())

	m.ObserveCapacity(0, 0, 0, 0)
	require.Equal(t, got, held(), "a share of 0 holds nothing")

	m.ObserveUnused(2.5, 100)
	m.ObserveUnused(0.5, 0)
	unused := "domainclass_llm_budget_unused_total"
	require.InDelta(t, 3, counter(t, reg, unused, map[string]string{"kind": "requests"}), 1e-9)
	require.InDelta(t, 100, counter(t, reg, unused, map[string]string{"kind": "tokens"}), 1e-9)
}

// counter returns the value of the counter name with labels, -1 when none.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
