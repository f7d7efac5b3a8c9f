package pools

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports each database pool of the process, labelled pool
// ("api", "worker", "lists"): its size, connections in use, and the
// acquires that had to wait and for how long in all. A pool whose waits
// climb is one whose work queues for connections, not in Postgres.
type Collector struct {
	pools                              map[string]*pgxpool.Pool
	max, inUse, acquires, waits, waitS *prometheus.Desc
}

// NewCollector returns the collector of pools, by their names.
func NewCollector(pools map[string]*pgxpool.Pool) *Collector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("domainclass_db_pool_"+name, help, []string{"pool"}, nil)
	}
	return &Collector{pools: pools,
		max:      desc("max_connections", "The pool's size (the API: DB_MAX_CONNS; the workers: their part of DB_MAX_CONNS; lists: list work's part of it)."),
		inUse:    desc("connections_in_use", "Connections of the pool held by a request, a job or River now."),
		acquires: desc("acquires_total", "Connections taken from the pool."),
		waits:    desc("acquire_waits_total", "Connections taken from the pool that had to wait for one to be free (or opened)."),
		waitS:    desc("acquire_wait_seconds_total", "Time the acquires that waited spent waiting for a connection of the pool."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.max, c.inUse, c.acquires, c.waits, c.waitS} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.pools {
		s := p.Stat()
		ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()), name)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(s.AcquiredConns()), name)
		ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(c.waitS, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds(), name)
	}
}
