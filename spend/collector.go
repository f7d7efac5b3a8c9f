package spend

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/domainclass/domainclass/db"
)

// TopCallers is how many callers the spend gauges name: the ones that
// spent most today. The label set stays bounded however many API keys a
// deployment has (and however many come and go), and the rest are summed
// under caller="(others)", so the totals still add up. Ten is the size of
// a dashboard's legend; who spent what beyond them is in GET /callers/me
// and the caller_spend table.
const TopCallers = 10

// OthersLabel is the caller label of the callers past the top ones.
const OthersLabel = "(others)"

// Collector exports what the callers' work asked of the model today
// (UTC), from Postgres (caller_spend): the deployment's figures, whichever
// process counted them. domainclass_caller_model_calls_today and
// domainclass_caller_spend_usd_today{caller} for the TopCallers that
// spent most, and the rest as caller="(others)". One query per interval
// whatever the number of scrapes.
type Collector struct {
	db       db.DBTX
	interval time.Duration
	logger   *slog.Logger

	calls, spend *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	top    []db.CallerUsage
	others db.CallerUsage
}

// NewCollector returns a collector over exec (the pool).
func NewCollector(exec db.DBTX, interval time.Duration, logger *slog.Logger) *Collector {
	return &Collector{db: exec, interval: interval, logger: logger,
		calls: prometheus.NewDesc("domainclass_caller_model_calls_today",
			"Model calls of each caller's jobs and lists today (UTC), for the 10 callers that spent most; the rest summed as caller=\"(others)\".",
			[]string{"caller"}, nil),
		spend: prometheus.NewDesc("domainclass_caller_spend_usd_today",
			"What each caller's model calls cost today (UTC), in US dollars from the price table, for the 10 callers that spent most; the rest summed as caller=\"(others)\".",
			[]string{"caller"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.calls
	ch <- c.spend
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	top, others := c.refresh()
	for _, u := range append(top, others) {
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.GaugeValue, float64(u.ModelCalls), u.Caller)
		ch <- prometheus.MustNewConstMetric(c.spend, prometheus.GaugeValue, u.SpendUSD, u.Caller)
	}
}

func (c *Collector) refresh() ([]db.CallerUsage, db.CallerUsage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.interval {
		return c.top, c.others
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.QueueStatsTimeout)
	defer cancel()
	top, others, err := db.CallerSpendTop(ctx, c.db, TopCallers)
	if err != nil {
		c.logger.Warn("error reading the callers' spend", "error", err) // the last numbers stay
	} else {
		others.Caller = OthersLabel
		c.top, c.others = top, others
	}
	c.at = time.Now()
	return c.top, c.others
}
