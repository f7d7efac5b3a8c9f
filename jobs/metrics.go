package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// Metrics are the worker-side Prometheus metrics. A nil
// *Metrics records nothing.
type Metrics struct {
	domainResults     *prometheus.CounterVec
	jobsEnded         *prometheus.CounterVec
	llmRequests       *prometheus.CounterVec
	llmDuration       prometheus.Histogram
	llmTokens         *prometheus.CounterVec
	webhookDeliveries *prometheus.CounterVec
	llmSlotsInUse     *prometheus.GaugeVec
	llmWait           *prometheus.HistogramVec
	llmCost           *prometheus.CounterVec
	evidenceDropped   *prometheus.CounterVec
	processRescued    prometheus.Counter
}

// NewMetrics registers the worker metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		domainResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_domain_results_total",
			Help: "Domains answered, by classifier, source (override, cache, llm, none) and outcome (completed, failed).",
		}, []string{"classifier", "source", "outcome"}),
		jobsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_jobs_ended_total",
			Help: "App jobs that ended, by status (COMPLETED, FAILED).",
		}, []string{"status"}),
		llmRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_llm_requests_total",
			Help: "Model requests sent, by HTTP status (or \"error\" when no response came).",
		}, []string{"status"}),
		llmDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "domainclass_llm_request_duration_seconds",
			Help:    "Time of one model request, whatever its outcome.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 8, 13, 21, 34, 60},
		}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_llm_tokens_total",
			Help: "Tokens reported by the model, by kind (prompt, completion).",
		}, []string{"kind"}),
		webhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_webhook_deliveries_total",
			Help: "Webhook delivery attempts, by outcome.",
		}, []string{"outcome"}),
		llmSlotsInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "domainclass_llm_slots_in_use",
			Help: "Model slots of this process held now, by class (interactive, list); LLM_MAX_CONCURRENCY in all.",
		}, []string{"class"}),
		llmWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "domainclass_llm_wait_seconds",
			Help:    "Time a model call waited for its slot and its turn of the rate limit, by class (interactive, list).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"class"}),
		llmCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_llm_cost_usd_total",
			Help: "What the model calls cost, in US dollars from the price table, by tier (standard: one call at a time; economy: the provider's Batch API).",
		}, []string{"tier"}),
		evidenceDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_evidence_dropped_total",
			Help: "Search results left out of the evidence for their address, by reason (scheme: not http(s); characters: spaces or controls; length: over 2,048 bytes).",
		}, []string{"reason"}),
		processRescued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "domainclass_worker_process_jobs_rescued_total",
			Help: "River jobs handed back because the worker process running them stopped renewing its lease (killed, or cut off from Postgres).",
		}),
	}
	for _, r := range []string{classifier.DroppedScheme, classifier.DroppedCharacters, classifier.DroppedLength} {
		m.evidenceDropped.WithLabelValues(r)
	}
	m.llmCost.WithLabelValues("standard")
	m.llmCost.WithLabelValues("economy")
	for _, c := range classifier.CallClasses() {
		m.llmSlotsInUse.WithLabelValues(string(c))
		m.llmWait.WithLabelValues(string(c))
	}
	reg.MustRegister(m.domainResults, m.jobsEnded, m.llmRequests, m.llmDuration, m.llmTokens, m.webhookDeliveries,
		m.llmSlotsInUse, m.llmWait, m.llmCost, m.evidenceDropped, m.processRescued)
	return m
}

// ListMetrics count lists' rows and ends. The API counts the rows it
// rejects or answers at upload and the rows a cancel leaves unanswered;
// workers count the rest. A process registers them once, whatever its roles. A nil
// *ListMetrics records nothing.
type ListMetrics struct {
	rows  *prometheus.CounterVec
	ended *prometheus.CounterVec
}

// NewListMetrics registers the list metrics on reg.
func NewListMetrics(reg prometheus.Registerer) *ListMetrics {
	m := &ListMetrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_list_rows_total",
			Help: "List rows that became final, by status (COMPLETED, FAILED, REJECTED, CANCELLED).",
		}, []string{"status"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_lists_ended_total",
			Help: "Lists that ended, by status (COMPLETED, CANCELLED, FAILED).",
		}, []string{"status"}),
	}
	reg.MustRegister(m.rows, m.ended)
	return m
}

// ListRows counts n rows that became final with status.
func (m *ListMetrics) ListRows(status classifier.Status, n int) {
	if m != nil && n > 0 {
		m.rows.WithLabelValues(string(status)).Add(float64(n))
	}
}

// ListEnded counts a list that ended with status.
func (m *ListMetrics) ListEnded(status classifier.Status) {
	if m != nil {
		m.ended.WithLabelValues(string(status)).Inc()
	}
}

// DomainResult counts one final answer.
func (m *Metrics) DomainResult(r classifier.Result) {
	if m == nil {
		return
	}
	source := string(r.Source)
	if source == "" {
		source = "none"
	}
	outcome := "completed"
	if r.Status == classifier.StatusFailed {
		outcome = "failed"
	}
	m.domainResults.WithLabelValues(r.Classifier, source, outcome).Inc()
}

// DomainsAnswered counts n final answers of classifierName from source
// at once (a list's answered rows, written as a set).
func (m *Metrics) DomainsAnswered(classifierName string, source classifier.Source, n int) {
	if m != nil && n > 0 {
		m.domainResults.WithLabelValues(classifierName, string(source), "completed").Add(float64(n))
	}
}

// EvidenceDropped counts a search result left out of the evidence for
// its address (classifier.PipelineConfig.OnEvidenceDropped).
func (m *Metrics) EvidenceDropped(reason string) {
	if m != nil {
		m.evidenceDropped.WithLabelValues(reason).Inc()
	}
}

// LLMCost adds what a model call cost (0 adds nothing) to its tier.
func (m *Metrics) LLMCost(tier string, usd float64) {
	if m != nil && usd > 0 {
		m.llmCost.WithLabelValues(tier).Add(usd)
	}
}

// ProcessRescued counts n jobs handed back from a dead worker process.
func (m *Metrics) ProcessRescued(n int) {
	if m != nil {
		m.processRescued.Add(float64(n))
	}
}

// JobEnded counts an app job that ended.
func (m *Metrics) JobEnded(status classifier.Status) {
	if m != nil {
		m.jobsEnded.WithLabelValues(string(status)).Inc()
	}
}

// WebhookDelivery counts one webhook delivery attempt by outcome.
func (m *Metrics) WebhookDelivery(outcome string) {
	if m != nil {
		m.webhookDeliveries.WithLabelValues(outcome).Inc()
	}
}

// ObserveLLMRequest records one model request (llm.Observer).
func (m *Metrics) ObserveLLMRequest(status string, d time.Duration, promptTokens, completionTokens int) {
	if m == nil {
		return
	}
	m.llmRequests.WithLabelValues(status).Inc()
	m.llmDuration.Observe(d.Seconds())
	m.llmTokens.WithLabelValues("prompt").Add(float64(promptTokens))
	m.llmTokens.WithLabelValues("completion").Add(float64(completionTokens))
}

// BatchTokens counts the tokens of an answer that came by batch: its
// request was not a call, so ObserveLLMRequest never saw it.
func (m *Metrics) BatchTokens(u *classifier.Usage) {
	if m != nil && u != nil {
		m.llmTokens.WithLabelValues("prompt").Add(float64(u.PromptTokens))
		m.llmTokens.WithLabelValues("completion").Add(float64(u.CompletionTokens))
	}
}

// ObserveSlotsInUse records how many model slots class holds (llm.SlotObserver).
func (m *Metrics) ObserveSlotsInUse(c classifier.CallClass, n int) {
	if m != nil {
		m.llmSlotsInUse.WithLabelValues(string(c)).Set(float64(n))
	}
}

// ObserveSlotWait records how long a model call of class waited for its
// slot (llm.SlotObserver).
func (m *Metrics) ObserveSlotWait(c classifier.CallClass, d time.Duration) {
	if m != nil {
		m.llmWait.WithLabelValues(string(c)).Observe(d.Seconds())
	}
}

// QueueCollector exports domainclass_queue_jobs{queue,state} and
// domainclass_queue_oldest_available_age_seconds{queue} from one query,
// run at most once per interval whatever the number of scrapes.
type QueueCollector struct {
	db       db.DBTX
	interval time.Duration
	queues   []string
	logger   *slog.Logger

	jobs, oldest, up *prometheus.Desc

	mu      sync.Mutex
	at      time.Time
	cached  []db.QueueStat
	dbUp    bool // the last query answered
	queries int
}

// NewQueueCollector returns a collector over exec (the pool) for the given queues
// (others appear once they have jobs).
func NewQueueCollector(exec db.DBTX, interval time.Duration, logger *slog.Logger, queues ...string) *QueueCollector {
	return &QueueCollector{
		db: exec, interval: interval, queues: queues, logger: logger,
		jobs: prometheus.NewDesc("domainclass_queue_jobs",
			"River jobs by queue and state (refreshed at most every few seconds).", []string{"queue", "state"}, nil),
		oldest: prometheus.NewDesc("domainclass_queue_oldest_available_age_seconds",
			"Age of the oldest job that is due and waiting for a worker (available, or scheduled or retryable past its time); 0 when none waits.", []string{"queue"}, nil),
		up: prometheus.NewDesc("domainclass_database_up",
			"1 when this process's last query for the queue gauges answered, 0 when Postgres could not be reached (the queue gauges then repeat the last numbers).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.oldest
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	stats, up := c.refresh()
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, map[bool]float64{true: 1}[up])
	counts := map[[2]string]int64{}
	oldest := map[string]float64{}
	queues := map[string]bool{}
	for _, q := range c.queues {
		queues[q] = true
	}
	for _, s := range stats {
		queues[s.Queue] = true
		counts[[2]string{s.Queue, s.State}] = s.Count
		oldest[s.Queue] = max(oldest[s.Queue], s.OldestDueSeconds)
	}
	for q := range queues {
		// Every state, zero included, so that a series does not vanish when
		// its count drops to nothing.
		for _, state := range rivertype.JobStates() {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(counts[[2]string{q, string(state)}]), q, string(state))
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest[q], q)
	}
}

// Queries returns how many queries the collector has run.
func (c *QueueCollector) Queries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries
}

func (c *QueueCollector) refresh() ([]db.QueueStat, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.interval {
		return c.cached, c.dbUp
	}
	ctx, cancel := context.WithTimeout(context.Background(), db.QueueStatsTimeout)
	defer cancel()
	c.queries++
	stats, err := db.QueueStats(ctx, c.db)
	if err != nil {
		// Keep serving the last numbers; try again at the next interval.
		c.logger.Warn("error reading queue stats", "error", err)
	} else {
		c.cached = stats
	}
	c.dbUp = err == nil
	c.at = time.Now()
	return c.cached, c.dbUp
}
