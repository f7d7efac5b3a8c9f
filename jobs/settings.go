package jobs

import (
	"fmt"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// QueueClassify is the queue of ClassifyArgs jobs.
const QueueClassify = "classify"

// QueueWebhook is the queue of WebhookArgs jobs: deliveries wait on other
// people's servers, so they get their own workers and never hold up
// classification.
const QueueWebhook = "webhook"

// The reviewed settings. Each value is a decision with a reason; change one
// in a reviewed commit, or override it per deployment with the environment
// variable named in Settings.
//
// Sizes come from Little's law, L = λ·W: the work in flight equals the
// arrival rate times the time each piece spends in the system. A fresh
// domain costs about W = 2–3 s (search ≈ 0.5–1 s + model ≈ 1.5 s), so
// LLMMaxConcurrency = 8 calls in flight serve λ = 8 / 2.5 s ≈ 3 domains/s
// (≈ 190/min), under the default rate limit.
const (
	// DefaultLLMMaxConcurrency: 8 calls in flight saturate a small-tier
	// provider account (≈3 domains/s at 2.5 s each) without queueing
	// hundreds of requests on its side; a burst of 500 jobs still means 8.
	DefaultLLMMaxConcurrency = 8
	// DefaultLLMRatePerMinute: 300 leaves 40% headroom under a 500 RPM tier
	// and caps spend if latency drops (8 slots at 0.5 s would be 960/min).
	DefaultLLMRatePerMinute = 300
	// DefaultDomainConcurrency: domains of one job run 5 at a time, so a
	// 10-domain job takes two rounds (≈5–6 s) and one job cannot take every
	// LLM slot while others wait.
	DefaultDomainConcurrency = 5
	// DefaultClassifyWorkers: River MaxWorkers of queue "classify". To keep
	// 8 LLM slots busy we need ≥ 8 domains in flight; at 5 per job that is
	// 2 jobs, and jobs answered from the cache need slots of their own while
	// those wait. 10 jobs (50 domains) keep the model busy with half the
	// domains cached, and bound goroutines and connections.
	DefaultClassifyWorkers = 10
	// DefaultMaxAttempts: River retries with (n^4) s backoff; 8 attempts
	// span ≈ 78 minutes of provider or database outage before the job is
	// given up and shown FAILED. Beyond that a caller is better served by a
	// FAILED answer it can resubmit (or an operator can replay) than by a job
	// that waits for days.
	DefaultMaxAttempts = 8
	// DefaultJobTimeout: a 10-domain job at 5 at a time is two rounds of
	// search (≤ 10 s) + model (≤ 60 s) = 140 s in the worst case, plus
	// waiting for an LLM slot under load. 5 minutes fails only a stuck job.
	DefaultJobTimeout = 5 * time.Minute
	// DefaultRescueStuckAfter: River puts a job whose worker died back in
	// the queue after this. It must exceed the job timeout (a live job is
	// never rescued while it runs); 10 minutes delays a caller by minutes,
	// not River's default hour.
	DefaultRescueStuckAfter = 10 * time.Minute
	// DefaultSoftStopTimeout: on SIGTERM running jobs get 25 s to finish,
	// under the common 30 s kill grace (Kubernetes, systemd); then they are
	// cancelled and retried, so nothing is lost.
	DefaultSoftStopTimeout = 25 * time.Second
	// DefaultCompletedRetention: finished River jobs stay visible in River
	// UI for a day (River's default); our own tables keep the answers.
	DefaultCompletedRetention = 24 * time.Hour
	// DefaultCancelledRetention: as completed.
	DefaultCancelledRetention = 24 * time.Hour
	// DefaultDiscardedRetention: given-up jobs are kept 7 days so that an
	// operator back from a weekend can still replay them.
	DefaultDiscardedRetention = 7 * 24 * time.Hour
	// DefaultLLMTimeout: one model call; small models answer in 1–3 s,
	// reasoning models in tens of seconds. Beyond 60 s the call is retried.
	DefaultLLMTimeout = 60 * time.Second
	// DefaultSearchTimeout: one search or homepage fetch; evidence that
	// takes longer is skipped rather than holding an LLM slot's worth of work.
	DefaultSearchTimeout = 10 * time.Second
	// DefaultCacheTTLHigh: answers with confidence 4–5 are reused for 60
	// days: what a company sells changes slowly.
	DefaultCacheTTLHigh = 60 * 24 * time.Hour
	// DefaultCacheTTLMedium: confidence 2–3 answers are reused for 30 days,
	// so doubtful answers are asked again sooner.
	DefaultCacheTTLMedium = 30 * 24 * time.Hour
	// DefaultCacheTTLLow: confidence 1 is no answer; it is never reused.
	DefaultCacheTTLLow = 0
	// DefaultClaimWait: a job whose domain another job is asking the model
	// about waits up to 30 s for that answer (≈10 model calls' time) before
	// it snoozes; the wait holds no LLM slot.
	DefaultClaimWait = 30 * time.Second
	// DefaultBusySnooze: how long such a job sleeps before it looks again.
	// Snoozing uses no attempt.
	DefaultBusySnooze = 5 * time.Second
	// DefaultMaxSnooze caps a provider's (or a webhook receiver's)
	// Retry-After, so a bogus header cannot park a job for a day.
	DefaultMaxSnooze = 10 * time.Minute
	// DefaultQueueMetricsInterval: the queue gauges come from one GROUP BY
	// over river_job, run at most this often however many scrapers ask;
	// Prometheus scrapes every 15-60 s, so 5 s is fresh enough and cheap.
	DefaultQueueMetricsInterval = 5 * time.Second
	// DefaultCallerRatePerMinute: accepted POSTs per caller per minute (a
	// minute's worth may come at once). 120 jobs of up to 10 domains is far
	// more than a worker answers (≈ 3 fresh domains/s ≈ 180/min), so honest
	// batch clients never meet it; a runaway loop does, within a second.
	DefaultCallerRatePerMinute = 120
	// DefaultCallerMaxQueuedDomains: domains of one caller accepted and not
	// yet final. 1000 is ≈ 5 minutes of one worker's fresh capacity (Little:
	// 1000 / 3 per s), so one caller's burst can delay the others by minutes,
	// not hours; cached domains drain in seconds.
	DefaultCallerMaxQueuedDomains = 1000
	// DefaultAuthCacheTTL: a key's lookup is reused this long, so an API
	// process does one key query per caller per 5 s under load, and a revoked
	// key stops working within 5 s.
	DefaultAuthCacheTTL = 5 * time.Second
	// DefaultWebhookWorkers: River MaxWorkers of queue "webhook". Job ends
	// arrive at about 3/s at most while the model is the bottleneck (more in
	// a burst of cached jobs); a receiver answering within 1 s keeps ≈3
	// deliveries in flight (Little's law). 20 leaves room for bursts and for
	// a few receivers that hang until the timeout (20 slots / 15 s ≈ 1.3
	// deliveries/s even when every receiver hangs). A delivery holds a
	// goroutine and a socket; it holds a database connection only while it
	// loads the job.
	DefaultWebhookWorkers = 20
	// DefaultWebhookTimeout: one delivery, connect to last byte. Standard
	// Webhooks recommends 15–30 s; receivers should answer 2xx at once and
	// work afterwards, so 15 s only cuts off a server that is stuck.
	DefaultWebhookTimeout = 15 * time.Second
	// DefaultWebhookMaxThrottles: a receiver's 429 or 503 with Retry-After
	// snoozes the delivery without using an attempt, at most this many times
	// per delivery; after that a throttle counts as a failed attempt, so a
	// receiver that always throttles still reaches the end of the schedule.
	// 10 snoozes of at most MaxSnooze (10 min) add at most 100 minutes.
	DefaultWebhookMaxThrottles = 10
)

// DefaultWebhookRetrySchedule is the wait before each retry of a failed
// delivery: the example schedule of the Standard Webhooks spec, so
// receivers meet the behaviour they know from other senders. Retries come
// fast first (a dropped connection, a deploy in progress), then spread over
// about three days (75.6 h in all), long enough to outlast a weekend
// outage of the receiver's on-call; after the last one the delivery is
// discarded and can be replayed for RETENTION_DISCARDED (7 days). One
// delivery makes len(schedule)+1 attempts: 11 with this schedule.
func DefaultWebhookRetrySchedule() []time.Duration {
	return []time.Duration{
		0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
		5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
	}
}

// Settings are the reviewed queue and provider settings, with the
// environment variables that override them.
type Settings struct {
	ClassifyWorkers    int           `env:"CLASSIFY_WORKERS"`
	DomainConcurrency  int           `env:"DOMAIN_CONCURRENCY"`
	MaxAttempts        int           `env:"JOB_MAX_ATTEMPTS"`
	JobTimeout         time.Duration `env:"JOB_TIMEOUT"`
	RescueStuckAfter   time.Duration `env:"RESCUE_STUCK_AFTER"`
	SoftStopTimeout    time.Duration `env:"SOFT_STOP_TIMEOUT"`
	CompletedRetention time.Duration `env:"RETENTION_COMPLETED"`
	CancelledRetention time.Duration `env:"RETENTION_CANCELLED"`
	DiscardedRetention time.Duration `env:"RETENTION_DISCARDED"`
	LLMMaxConcurrency  int           `env:"LLM_MAX_CONCURRENCY"`
	LLMRatePerMinute   int           `env:"LLM_RATE_PER_MINUTE"`
	LLMTimeout         time.Duration `env:"LLM_TIMEOUT"`
	SearchTimeout      time.Duration `env:"SEARCH_TIMEOUT"`
	CacheTTLHigh       time.Duration `env:"CACHE_TTL_HIGH"`
	CacheTTLMedium     time.Duration `env:"CACHE_TTL_MEDIUM"`
	CacheTTLLow        time.Duration `env:"CACHE_TTL_LOW"`
	ClaimWait          time.Duration `env:"CLAIM_WAIT"`
	BusySnooze         time.Duration `env:"BUSY_SNOOZE"`
	MaxSnooze          time.Duration `env:"MAX_SNOOZE"`
	// QueueMetricsInterval: see DefaultQueueMetricsInterval.
	QueueMetricsInterval time.Duration `env:"QUEUE_METRICS_INTERVAL"`
	// Per-caller limits (overridable per API key) and the key cache.
	CallerRatePerMinute    int           `env:"CALLER_RATE_PER_MINUTE"`
	CallerMaxQueuedDomains int           `env:"CALLER_MAX_QUEUED_DOMAINS"`
	AuthCacheTTL           time.Duration `env:"AUTH_CACHE_TTL"`

	WebhookWorkers       int             `env:"WEBHOOK_WORKERS"`
	WebhookTimeout       time.Duration   `env:"WEBHOOK_TIMEOUT"`
	WebhookRetrySchedule []time.Duration `env:"WEBHOOK_RETRY_SCHEDULE"` // comma-separated: 0s,5s,5m,...
	WebhookMaxThrottles  int             `env:"WEBHOOK_MAX_THROTTLES"`
}

// DefaultSettings returns the reviewed defaults.
func DefaultSettings() Settings {
	return Settings{
		ClassifyWorkers:    DefaultClassifyWorkers,
		DomainConcurrency:  DefaultDomainConcurrency,
		MaxAttempts:        DefaultMaxAttempts,
		JobTimeout:         DefaultJobTimeout,
		RescueStuckAfter:   DefaultRescueStuckAfter,
		SoftStopTimeout:    DefaultSoftStopTimeout,
		CompletedRetention: DefaultCompletedRetention,
		CancelledRetention: DefaultCancelledRetention,
		DiscardedRetention: DefaultDiscardedRetention,
		LLMMaxConcurrency:  DefaultLLMMaxConcurrency,
		LLMRatePerMinute:   DefaultLLMRatePerMinute,
		LLMTimeout:         DefaultLLMTimeout,
		SearchTimeout:      DefaultSearchTimeout,
		CacheTTLHigh:       DefaultCacheTTLHigh,
		CacheTTLMedium:     DefaultCacheTTLMedium,
		CacheTTLLow:        DefaultCacheTTLLow,
		ClaimWait:          DefaultClaimWait,
		BusySnooze:         DefaultBusySnooze,
		MaxSnooze:          DefaultMaxSnooze,

		QueueMetricsInterval:   DefaultQueueMetricsInterval,
		CallerRatePerMinute:    DefaultCallerRatePerMinute,
		CallerMaxQueuedDomains: DefaultCallerMaxQueuedDomains,
		AuthCacheTTL:           DefaultAuthCacheTTL,
		WebhookWorkers:         DefaultWebhookWorkers,
		WebhookTimeout:         DefaultWebhookTimeout,
		WebhookRetrySchedule:   DefaultWebhookRetrySchedule(),
		WebhookMaxThrottles:    DefaultWebhookMaxThrottles,
	}
}

// Validate returns an error naming the first setting out of range.
func (s Settings) Validate() error {
	switch {
	case s.ClassifyWorkers < 1 || s.ClassifyWorkers > 10_000:
		return fmt.Errorf("CLASSIFY_WORKERS must be between 1 and 10000, got %d", s.ClassifyWorkers)
	case s.DomainConcurrency < 1:
		return fmt.Errorf("DOMAIN_CONCURRENCY must be at least 1, got %d", s.DomainConcurrency)
	case s.MaxAttempts < 1:
		return fmt.Errorf("JOB_MAX_ATTEMPTS must be at least 1, got %d", s.MaxAttempts)
	case s.JobTimeout <= 0:
		return fmt.Errorf("JOB_TIMEOUT must be positive, got %s", s.JobTimeout)
	case s.RescueStuckAfter < s.JobTimeout:
		return fmt.Errorf("RESCUE_STUCK_AFTER (%s) must be at least JOB_TIMEOUT (%s)", s.RescueStuckAfter, s.JobTimeout)
	case s.SoftStopTimeout <= 0:
		return fmt.Errorf("SOFT_STOP_TIMEOUT must be positive, got %s", s.SoftStopTimeout)
	case s.LLMMaxConcurrency < 1:
		return fmt.Errorf("LLM_MAX_CONCURRENCY must be at least 1, got %d", s.LLMMaxConcurrency)
	case s.LLMRatePerMinute < 1:
		return fmt.Errorf("LLM_RATE_PER_MINUTE must be at least 1, got %d", s.LLMRatePerMinute)
	case s.LLMTimeout <= 0 || s.SearchTimeout <= 0:
		return fmt.Errorf("LLM_TIMEOUT and SEARCH_TIMEOUT must be positive")
	case s.CacheTTLHigh < 0 || s.CacheTTLMedium < 0 || s.CacheTTLLow < 0:
		return fmt.Errorf("CACHE_TTL_* must not be negative")
	case s.BusySnooze <= 0 || s.MaxSnooze <= 0 || s.ClaimWait <= 0:
		return fmt.Errorf("CLAIM_WAIT, BUSY_SNOOZE and MAX_SNOOZE must be positive")
	case s.CallerRatePerMinute < 1 || s.CallerMaxQueuedDomains < 1:
		return fmt.Errorf("CALLER_RATE_PER_MINUTE and CALLER_MAX_QUEUED_DOMAINS must be at least 1")
	case s.AuthCacheTTL < 0:
		return fmt.Errorf("AUTH_CACHE_TTL must not be negative")
	case s.WebhookWorkers < 1 || s.WebhookWorkers > 10_000:
		return fmt.Errorf("WEBHOOK_WORKERS must be between 1 and 10000, got %d", s.WebhookWorkers)
	case s.WebhookTimeout <= 0:
		return fmt.Errorf("WEBHOOK_TIMEOUT must be positive, got %s", s.WebhookTimeout)
	case len(s.WebhookRetrySchedule) < 1 || len(s.WebhookRetrySchedule) > 100:
		return fmt.Errorf("WEBHOOK_RETRY_SCHEDULE must list 1 to 100 durations, got %d", len(s.WebhookRetrySchedule))
	case s.WebhookMaxThrottles < 0:
		return fmt.Errorf("WEBHOOK_MAX_THROTTLES must not be negative, got %d", s.WebhookMaxThrottles)
	}
	for _, d := range s.WebhookRetrySchedule {
		if d < 0 {
			return fmt.Errorf("WEBHOOK_RETRY_SCHEDULE must not hold negative durations, got %s", d)
		}
	}
	return nil
}

// webhookJobSlack is the River job timeout of a delivery beyond the HTTP
// timeout: loading the job and signing take milliseconds, but the request's
// own timeout must always fire first, with the clearer error. (River's
// rescuer leaves a job alone while it is within its worker's timeout, so
// RESCUE_STUCK_AFTER need not exceed this.)
const webhookJobSlack = 10 * time.Second

// WebhookJobTimeout is the River timeout of one delivery attempt.
func (s Settings) WebhookJobTimeout() time.Duration { return s.WebhookTimeout + webhookJobSlack }

// WebhookMaxAttempts is how many times one delivery is tried: once, then
// once after each wait of the retry schedule.
func (s Settings) WebhookMaxAttempts() int { return len(s.WebhookRetrySchedule) + 1 }

// Freshness returns the cache policy of the settings.
func (s Settings) Freshness() classifier.Freshness {
	return classifier.Freshness{High: s.CacheTTLHigh, Medium: s.CacheTTLMedium, Low: s.CacheTTLLow}
}

// ClaimTTL is the lease on a domain while one job asks the model about it:
// no job runs longer than JobTimeout, so a live claim never runs out under
// its owner, and a crashed owner's claim is free after it.
func (s Settings) ClaimTTL() time.Duration { return s.JobTimeout + time.Minute }
