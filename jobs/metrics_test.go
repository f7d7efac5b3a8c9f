package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// gauge returns the value of a gauge with the given labels, or -1.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	if m := metric(t, reg, name, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// counter returns the value of a counter with the given labels, or -1.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	if m := metric(t, reg, name, labels); m != nil {
		return m.GetCounter().GetValue()
	}
	return -1
}

// metric returns the metric of a family with the given labels, or nil.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				return m
			}
		}
	}
	return nil
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for _, lp := range m.GetLabel() {
		if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
			return false
		}
	}
	return true
}

type noopArgs struct{ N int }

func (noopArgs) Kind() string { return "noop" }

func TestQueueCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := dbtest.Schema(t)
	counter := &dbtest.QueryCounter{}
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: schema, Tracer: counter})
	require.NoError(t, err)
	t.Cleanup(d.Close)
	client, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: schema})
	require.NoError(t, err)

	// Three available jobs; one scheduled 90 s ago (due, not yet promoted by
	// River's scheduler: the oldest waiting); one scheduled in an hour; one
	// pending on another queue.
	for i := range 3 {
		_, err := client.Insert(ctx, noopArgs{N: i}, &river.InsertOpts{Queue: jobs.QueueClassify})
		require.NoError(t, err)
	}
	_, err = client.Insert(ctx, noopArgs{N: 8}, &river.InsertOpts{Queue: jobs.QueueClassify, ScheduledAt: time.Now().Add(-90 * time.Second)})
	require.NoError(t, err)
	_, err = client.Insert(ctx, noopArgs{N: 9}, &river.InsertOpts{Queue: jobs.QueueClassify, ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = client.Insert(ctx, noopArgs{N: 10}, &river.InsertOpts{Queue: "other", Pending: true})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	collector := jobs.NewQueueCollector(d.Pool, time.Hour, slog.New(slog.DiscardHandler), jobs.QueueClassify, "webhook")
	reg.MustRegister(collector)

	before := counter.N()
	require.Equal(t, 3.0, gauge(t, reg, "domainclass_queue_jobs", map[string]string{"queue": "classify", "state": "available"}))
	require.Equal(t, 2.0, gauge(t, reg, "domainclass_queue_jobs", map[string]string{"queue": "classify", "state": "scheduled"}))
	require.Equal(t, 0.0, gauge(t, reg, "domainclass_queue_jobs", map[string]string{"queue": "classify", "state": "discarded"}),
		"every state is exported, zero included")
	require.Equal(t, 0.0, gauge(t, reg, "domainclass_queue_jobs", map[string]string{"queue": "webhook", "state": "available"}))
	require.Equal(t, 1.0, gauge(t, reg, "domainclass_queue_jobs", map[string]string{"queue": "other", "state": "pending"}))
	age := gauge(t, reg, "domainclass_queue_oldest_available_age_seconds", map[string]string{"queue": "classify"})
	require.InDelta(t, 90, age, 5)
	require.Equal(t, 0.0, gauge(t, reg, "domainclass_queue_oldest_available_age_seconds", map[string]string{"queue": "webhook"}))

	require.Equal(t, 1.0, gauge(t, reg, "domainclass_database_up", nil))

	// Six scrapes above within the interval: one query in all.
	require.Equal(t, int64(1), counter.N()-before, "queries issued for %d scrapes", 8)
	require.Equal(t, 1, collector.Queries())

	// A process that cannot reach Postgres says so.
	unreachable, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	defer unreachable.Close()
	downReg := prometheus.NewRegistry()
	downReg.MustRegister(jobs.NewQueueCollector(unreachable, time.Hour, slog.New(slog.DiscardHandler), jobs.QueueClassify))
	require.Equal(t, 0.0, gauge(t, downReg, "domainclass_database_up", nil))
}
