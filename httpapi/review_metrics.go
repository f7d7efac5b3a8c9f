package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// ReviewCollector exports the review queues and the model's agreement with
// the reviewers (issue 39), from Postgres, the figures of GET
// /review/stats: domainclass_review_queued{classifier}, and for each
// classifier, model, prompt version and queue (audit is the unbiased
// sample) domainclass_review_reviewed, domainclass_review_agreement and its
// 95% Wilson interval, domainclass_review_agreement_low and _high. A
// changed prompt or model is a series of its own. One query per interval
// whatever the number of scrapes.
type ReviewCollector struct {
	db         db.DBTX
	interval   time.Duration
	logger     *slog.Logger
	classifier []string

	queued, reviewed, agreement, low, high *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	depths map[string]int
	stats  []classifier.ReviewStat
}

// NewReviewCollector returns a collector over exec (the pool) for the
// named classifiers (each has a queue gauge, 0 when empty).
func NewReviewCollector(exec db.DBTX, interval time.Duration, logger *slog.Logger, classifiers []string) *ReviewCollector {
	labels := []string{"classifier", "model", "prompt_version", "queue"}
	return &ReviewCollector{db: exec, interval: interval, logger: logger, classifier: classifiers,
		queued: prometheus.NewDesc("domainclass_review_queued",
			"Answers waiting in each classifier's review queue.", []string{"classifier"}, nil),
		reviewed: prometheus.NewDesc("domainclass_review_reviewed",
			"The model's answers reviewers gave a verdict on, by classifier, model, prompt version and queue (audit: the random sample of confident answers).",
			labels, nil),
		agreement: prometheus.NewDesc("domainclass_review_agreement",
			"The share of the reviewed answers the reviewers agreed with; on queue=\"audit\", the model's accuracy on its confident answers.",
			labels, nil),
		low: prometheus.NewDesc("domainclass_review_agreement_low",
			"The lower bound of domainclass_review_agreement's 95% Wilson interval.", labels, nil),
		high: prometheus.NewDesc("domainclass_review_agreement_high",
			"The upper bound of domainclass_review_agreement's 95% Wilson interval.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ReviewCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.reviewed, c.agreement, c.low, c.high} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ReviewCollector) Collect(ch chan<- prometheus.Metric) {
	depths, stats := c.refresh()
	for _, name := range c.classifier {
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(depths[name]), name)
	}
	for _, s := range stats {
		for queue, t := range s.Queues {
			share, low, high := t.Agreement()
			labels := []string{s.Classifier, s.Model, s.PromptVersion, queue}
			ch <- prometheus.MustNewConstMetric(c.reviewed, prometheus.GaugeValue, float64(t.Reviewed), labels...)
			ch <- prometheus.MustNewConstMetric(c.agreement, prometheus.GaugeValue, share, labels...)
			ch <- prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, low, labels...)
			ch <- prometheus.MustNewConstMetric(c.high, prometheus.GaugeValue, high, labels...)
		}
	}
}

func (c *ReviewCollector) refresh() (map[string]int, []classifier.ReviewStat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.interval {
		return c.depths, c.stats
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.QueueStatsTimeout)
	defer cancel()
	depths, err := db.ReviewQueued(ctx, c.db)
	var stats []classifier.ReviewStat
	if err == nil {
		stats, err = db.ReviewStats(ctx, c.db, "")
	}
	if err != nil {
		c.logger.Warn("error reading the review statistics", "error", err) // the last numbers stay
	} else {
		c.depths, c.stats = depths, stats
	}
	c.at = time.Now()
	return c.depths, c.stats
}
