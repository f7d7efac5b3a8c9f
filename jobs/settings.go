package jobs

import (
	"fmt"
	"time"
)

// QueueClassify is the queue of ClassifyArgs jobs.
const QueueClassify = "classify"

// QueueList is the queue of ClassifyListArgs jobs: a list's chunks wait
// here, apart from the 10-domain jobs of queue "classify", so that a
// million-row list never queues ahead of interactive work.
const QueueList = "list"

// QueueWebhook is the queue of WebhookArgs jobs: deliveries wait on other
// people's servers, so they get their own workers and never hold up
// classification.
const QueueWebhook = "webhook"

// The reviewed queue settings. Each value is a decision with a reason;
// change one in a reviewed commit, or per deployment through the
// environment (cmd/domainclass/config.go names the variables). The model
// bounds they size against live in classifier/llm (8 calls in flight, 300
// a minute, per process): a fresh domain costs about 2–3 s, so a process
// answers about 3 fresh domains a second (Little's law, L = λ·W).
const (
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
	// DefaultListWorkers: River MaxWorkers of queue "list", the chunks of
	// lists running at once per process. Fair share is decided where model
	// slots are handed out (classifier.Share), and it can only share between lists
	// that have calls waiting there: a list whose chunks all sit queued in
	// River behind another's gets nothing. 32 runs every chunk in flight of
	// four lists (DefaultListChunksInFlight each) at once, instead of
	// River's first come, first served deciding. A running chunk that waits
	// for the model costs goroutines, not connections or slots.
	DefaultListWorkers = 32
	// DefaultListDomainConcurrency: domains of one chunk at once. Keep it at
	// least LLM_MAX_CONCURRENCY (8 by default), twice for room: a process
	// shares its model slots only between the lists whose calls wait there,
	// so one chunk of a list must be able to ask for the list's whole
	// share. With 16 at 16 slots, two callers' lists measured at 1.00 of
	// each other on two worker processes; with 8, a list whose chunks sat
	// on one process got 0.41 (docs/BENCHMARKS.md).
	DefaultListDomainConcurrency = 16
	// DefaultListChunkRows: rows per chunk job. At the model-bound rate one
	// chunk gets (8 in flight / 2.5 s ≈ 3 domains/s) a chunk runs about a
	// minute; from the cache, a fifth of a second, of which the chunk's own
	// work (load, end, feed the next) is about 2%. Smaller chunks cost more
	// jobs; larger ones make a cancel or another list wait longer for a
	// worker.
	DefaultListChunkRows = 200
	// DefaultListChunksInFlight: chunks of one list queued or running at a
	// time; the chunks queue one another as they run. 8 puts chunks of every
	// list on every worker process with near certainty (with two, all 8 on
	// one has odds of 1 in 128), so that each process shares its own slots
	// between all the lists; and keeps river_job small however long the
	// list. Raise it with more than four worker processes.
	DefaultListChunksInFlight = 8
	// DefaultListChunkRunTime: a chunk starts no new domain after 2 minutes
	// of one run and snoozes (no attempt used) to go on later, so a run ends
	// well inside JOB_TIMEOUT even when the model slows to 60 s a call.
	DefaultListChunkRunTime = 2 * time.Minute
	// DefaultBatchMaxRequests: OpenAI takes up to 50,000 requests in one
	// batch file, but also caps the file at 200 MB, and one request with a
	// full classifier.DefaultEvidenceMaxChars of evidence is about 6.1 kB (measured): 50,000
	// would make 307 MB. 20,000 make 123 MB, room for evidence in scripts
	// of two or three bytes a character. A file over 200 MB is not sent:
	// its requests become calls (BatchWorker).
	DefaultBatchMaxRequests = 20_000
	// DefaultBatchPollInterval: a batch takes minutes to hours; a look a
	// minute is one small request, and a list's answers arrive at most a
	// minute after the provider has them.
	DefaultBatchPollInterval = time.Minute
	// DefaultBatchMaxAttempts: a batch the provider fails as a whole (a
	// token quota, an outage) is submitted again twice before its rows
	// fail.
	DefaultBatchMaxAttempts = 3
	// DefaultDomainAttempts: a domain whose answer fails transiently (a
	// reset connection, a database error, a model 5xx) is tried 3 times in
	// one run of its job or chunk, DomainRetryBackoff apart and doubling
	// (1 s, then 2 s), before the run goes back to River: one bad domain
	// then holds one of the run's slots for seconds, while its neighbours
	// are answered, instead of sending them all to River's backoff (16 s,
	// then 81 s…). A failure that outlasts 3 s is an outage, River's to
	// ride out. A throttle (429) is not retried here: it snoozes the run.
	DefaultDomainAttempts = 3
	// DefaultDomainRetryBackoff: the first wait of a domain's retries; see
	// DefaultDomainAttempts. Storing an answer that arrived is retried
	// longer (StoreRetryFor): it was paid for.
	DefaultDomainRetryBackoff = time.Second
	// DefaultListSweepInterval: how often the leader looks for lists that
	// are running with no chunk queued (a chunk discarded by River's
	// rescuer, or cancelled from River UI, before it could hand on its
	// work): it fails their orphaned rows with a reason and queues the
	// next chunks. A minute is one cheap query per active list, and a
	// stalled list waits at most that long.
	DefaultListSweepInterval = time.Minute
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
	// DefaultProcessLeaseTTL: each worker process renews a lease in
	// Postgres every sixth of this (1 s); one whose lease has not been
	// renewed for this long is dead, and the jobs it was running are handed
	// back at once (ProcessLease), so a kill -9 costs seconds, not
	// RESCUE_STUCK_AFTER. 6 s is six missed renewals: longer than a GC
	// pause or a busy second on two cores, short enough that work moves
	// again within 15 s of a death (the lease, a look every 2 s, River's
	// 1 s fetch).
	DefaultProcessLeaseTTL = 6 * time.Second
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
	// DefaultJobRetention: an ended job (POST /domains/classify), its
	// inputs and its answers are deleted this long after it ended (the
	// shared answers in the cache are not: they have their own freshness).
	// Callers read a job within minutes, or hours at most; 30 days leaves a
	// month's reconciliation, and is well past River's own 7 days, so a
	// job is never deleted while its River job could still be retried.
	DefaultJobRetention = 30 * 24 * time.Hour
	// DefaultListRetention: an ended list and its rows (results, refs,
	// evidence addresses) are deleted this long after it ended. A list is
	// an export: its caller downloads the results when the list.completed
	// webhook arrives or `submit --wait` ends, within hours; 30 days (as
	// JOB_RETENTION) leaves a month to download them again or reconcile,
	// and is past River's own 7 days, so a list outlives its River jobs.
	// Lists are where the bytes are (about 480–750 bytes an answered row,
	// up to a million rows a list; see CALLER_MAX_STORED_ROWS): this
	// bounds, with CALLER_MAX_STORED_ROWS, what a caller can keep stored. A list keeps the retention it was uploaded
	// under.
	DefaultListRetention = 30 * 24 * time.Hour
	// DefaultChangeNotifyWindow: a job or list that received an answer is
	// sent answer.changed when the answer changes within this long after
	// it ended. 30 days is JOB_RETENTION's and LIST_RETENTION's default:
	// within it the caller can still fetch what it got and compare; later,
	// the rows that say who got which answer may be purged anyway.
	DefaultChangeNotifyWindow = 30 * 24 * time.Hour
	// DefaultChangeFanoutInterval: how often the fan-out publishes the
	// changes recorded since (GET /domains/changes lists them from then)
	// and queues their answer.changed deliveries. A few seconds keeps a
	// reviewer's correction close to its callers; each run is one short
	// transaction, a few statements when there is nothing to do, and a
	// snooze of the one River job (ChangeFanoutWorker).
	DefaultChangeFanoutInterval = 2 * time.Second
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
	// DefaultWebhookPerHost: deliveries in flight to one receiver (host and
	// port) per worker process. A receiver that hangs holds at most these
	// many webhook workers until WebhookTimeout, so 20 workers keep 16 for
	// everybody else; 4 at once is more than a healthy receiver answering
	// within a second needs at ≈3 job ends a second. The rest of its
	// deliveries wait (a snooze of WebhookBusySnooze, no attempt used).
	DefaultWebhookPerHost = 4
	// DefaultWebhookPerCaller: deliveries in flight for one caller's jobs
	// and lists per worker process, over all its receivers: half the
	// workers, so that one caller with many slow receivers cannot take all.
	DefaultWebhookPerCaller = 10
	// WebhookBusySnooze is how long a delivery waits when its receiver or
	// its caller has every slot: about the time a healthy delivery takes,
	// with jitter so that the waiting ones do not all return at once.
	WebhookBusySnooze = time.Second
	// DefaultWebhookMaxThrottles: a receiver's 429 or 503 with Retry-After
	// snoozes the delivery without using an attempt, at most this many times
	// per delivery; after that a throttle counts as a failed attempt, so a
	// receiver that always throttles still reaches the end of the schedule.
	// 10 snoozes of at most MaxSnooze (10 min) add at most 100 minutes.
	// River counts snoozes, not why: a delivery deferred for a busy
	// receiver (WebhookBusySnooze) uses up one of these too, which only
	// means that such a receiver's later 429s count as failed attempts.
	DefaultWebhookMaxThrottles = 10
)

// DefaultWebhookRetrySchedule is the wait before each retry of a failed
// delivery: the example schedule of the Standard Webhooks spec, so
// receivers meet the behaviour they know from other senders, except that
// the first retry waits 5 s rather than none: a receiver that just timed
// out gets no second request at once. Retries come fast first (a dropped
// connection, a deploy in progress), then spread over
// about three days (75.6 h in all), long enough to outlast a weekend
// outage of the receiver's on-call; after the last one the delivery is
// discarded and can be replayed for DefaultDiscardedRetention (7 days). One
// delivery makes len(schedule)+1 attempts: 11 with this schedule.
func DefaultWebhookRetrySchedule() []time.Duration {
	return []time.Duration{
		5 * time.Second, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
		5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
	}
}

// Settings are the reviewed queue settings: River's queues, attempts,
// timeouts and retention, and the webhook deliveries'.
type Settings struct {
	// ClassifyWorkers is River's MaxWorkers of queue "classify".
	ClassifyWorkers int
	// DomainConcurrency is how many domains of one job run at once.
	DomainConcurrency int
	MaxAttempts       int
	JobTimeout        time.Duration
	RescueStuckAfter  time.Duration
	// ProcessLeaseTTL: see DefaultProcessLeaseTTL.
	ProcessLeaseTTL    time.Duration
	SoftStopTimeout    time.Duration
	CompletedRetention time.Duration
	CancelledRetention time.Duration
	DiscardedRetention time.Duration
	JobRetention       time.Duration
	// ListRetention is how long an ended list is kept; an upload stamps it
	// on the list.
	ListRetention time.Duration
	// BusySnooze is how long a job sleeps while another job asks the model
	// about one of its domains; MaxSnooze caps any Retry-After honoured.
	BusySnooze time.Duration
	MaxSnooze  time.Duration
	// QueueMetricsInterval: see DefaultQueueMetricsInterval.
	QueueMetricsInterval time.Duration

	ListWorkers           int
	ListDomainConcurrency int
	ListChunkRows         int
	ListChunksInFlight    int
	ListChunkRunTime      time.Duration
	// ListSweepInterval is how often stalled lists are looked for.
	ListSweepInterval time.Duration

	// DomainAttempts is how many times one run tries a domain whose answer
	// fails transiently, DomainRetryBackoff apart (doubling).
	DomainAttempts     int
	DomainRetryBackoff time.Duration

	// BatchMaxRequests is the most requests in one provider batch, and the
	// rows of an economy list's chunk; BatchPollInterval how often a
	// running batch is looked at; BatchMaxAttempts how many provider
	// batches a chunk's requests get when the provider fails them whole.
	BatchMaxRequests  int
	BatchPollInterval time.Duration
	BatchMaxAttempts  int

	WebhookWorkers       int
	WebhookTimeout       time.Duration
	WebhookRetrySchedule []time.Duration
	WebhookMaxThrottles  int
	WebhookPerHost       int
	WebhookPerCaller     int

	// ChangeNotifyWindow: see DefaultChangeNotifyWindow;
	// ChangeFanoutInterval: see DefaultChangeFanoutInterval.
	ChangeNotifyWindow   time.Duration
	ChangeFanoutInterval time.Duration
}

// DefaultSettings returns the reviewed defaults.
func DefaultSettings() Settings {
	return Settings{
		ClassifyWorkers:       DefaultClassifyWorkers,
		DomainConcurrency:     DefaultDomainConcurrency,
		MaxAttempts:           DefaultMaxAttempts,
		JobTimeout:            DefaultJobTimeout,
		RescueStuckAfter:      DefaultRescueStuckAfter,
		ProcessLeaseTTL:       DefaultProcessLeaseTTL,
		SoftStopTimeout:       DefaultSoftStopTimeout,
		CompletedRetention:    DefaultCompletedRetention,
		JobRetention:          DefaultJobRetention,
		ListRetention:         DefaultListRetention,
		CancelledRetention:    DefaultCancelledRetention,
		DiscardedRetention:    DefaultDiscardedRetention,
		BusySnooze:            DefaultBusySnooze,
		MaxSnooze:             DefaultMaxSnooze,
		QueueMetricsInterval:  DefaultQueueMetricsInterval,
		ListWorkers:           DefaultListWorkers,
		ListDomainConcurrency: DefaultListDomainConcurrency,
		ListChunkRows:         DefaultListChunkRows,
		ListChunksInFlight:    DefaultListChunksInFlight,
		ListChunkRunTime:      DefaultListChunkRunTime,
		ListSweepInterval:     DefaultListSweepInterval,
		DomainAttempts:        DefaultDomainAttempts,
		DomainRetryBackoff:    DefaultDomainRetryBackoff,
		BatchMaxRequests:      DefaultBatchMaxRequests,
		BatchPollInterval:     DefaultBatchPollInterval,
		BatchMaxAttempts:      DefaultBatchMaxAttempts,
		WebhookWorkers:        DefaultWebhookWorkers,
		WebhookTimeout:        DefaultWebhookTimeout,
		WebhookRetrySchedule:  DefaultWebhookRetrySchedule(),
		WebhookMaxThrottles:   DefaultWebhookMaxThrottles,
		WebhookPerHost:        DefaultWebhookPerHost,
		WebhookPerCaller:      DefaultWebhookPerCaller,
		ChangeNotifyWindow:    DefaultChangeNotifyWindow,
		ChangeFanoutInterval:  DefaultChangeFanoutInterval,
	}
}

// Validate returns an error naming the first setting out of range.
func (s Settings) Validate() error {
	switch {
	case s.ClassifyWorkers < 1 || s.ClassifyWorkers > 10_000:
		return fmt.Errorf("ClassifyWorkers must be between 1 and 10000, got %d", s.ClassifyWorkers)
	case s.DomainConcurrency < 1:
		return fmt.Errorf("DomainConcurrency must be at least 1, got %d", s.DomainConcurrency)
	case s.MaxAttempts < 1:
		return fmt.Errorf("MaxAttempts must be at least 1, got %d", s.MaxAttempts)
	case s.JobTimeout <= 0:
		return fmt.Errorf("JobTimeout must be positive, got %s", s.JobTimeout)
	case s.RescueStuckAfter < s.JobTimeout:
		return fmt.Errorf("RescueStuckAfter (%s) must be at least JobTimeout (%s)", s.RescueStuckAfter, s.JobTimeout)
	case s.ProcessLeaseTTL < 500*time.Millisecond || s.ProcessLeaseTTL > time.Minute:
		return fmt.Errorf("ProcessLeaseTTL must be between 500ms and 1m, got %s", s.ProcessLeaseTTL)
	case s.SoftStopTimeout <= 0:
		return fmt.Errorf("SoftStopTimeout must be positive, got %s", s.SoftStopTimeout)
	case s.BusySnooze <= 0 || s.MaxSnooze <= 0:
		return fmt.Errorf("BusySnooze and MaxSnooze must be positive")
	case s.ListWorkers < 1 || s.ListWorkers > 10_000:
		return fmt.Errorf("ListWorkers must be between 1 and 10000, got %d", s.ListWorkers)
	case s.ListDomainConcurrency < 1 || s.ListChunkRows < 1 || s.ListChunksInFlight < 1:
		return fmt.Errorf("ListDomainConcurrency, ListChunkRows and ListChunksInFlight must be at least 1")
	case s.ListChunkRunTime <= 0:
		return fmt.Errorf("ListChunkRunTime must be positive, got %s", s.ListChunkRunTime)
	case s.ChangeNotifyWindow < 0:
		return fmt.Errorf("ChangeNotifyWindow must not be negative, got %s", s.ChangeNotifyWindow)
	case s.ChangeFanoutInterval < time.Second:
		return fmt.Errorf("ChangeFanoutInterval must be at least 1s, got %s", s.ChangeFanoutInterval)
	case s.ListSweepInterval < time.Second:
		return fmt.Errorf("ListSweepInterval must be at least 1s, got %s", s.ListSweepInterval)
	case s.DomainAttempts < 1 || s.DomainAttempts > 10:
		return fmt.Errorf("DomainAttempts must be between 1 and 10, got %d", s.DomainAttempts)
	case s.DomainRetryBackoff < 0 || s.DomainRetryBackoff > time.Minute:
		return fmt.Errorf("DomainRetryBackoff must be between 0 and 1m, got %s", s.DomainRetryBackoff)
	case s.JobRetention < s.DiscardedRetention:
		return fmt.Errorf("JobRetention (%s) must be at least the %s a given-up River job is kept: a job must outlive its River job", s.JobRetention, s.DiscardedRetention)
	case s.ListRetention < s.DiscardedRetention:
		return fmt.Errorf("ListRetention (%s) must be at least the %s a given-up River job is kept: a list must outlive its River jobs", s.ListRetention, s.DiscardedRetention)
	case s.BatchMaxRequests < 1 || s.BatchMaxRequests > 50_000:
		return fmt.Errorf("BatchMaxRequests must be between 1 and 50000 (the provider's limit), got %d", s.BatchMaxRequests)
	case s.BatchPollInterval <= 0 || s.BatchMaxAttempts < 1:
		return fmt.Errorf("BatchPollInterval must be positive and BatchMaxAttempts at least 1")
	case s.WebhookWorkers < 1 || s.WebhookWorkers > 10_000:
		return fmt.Errorf("WebhookWorkers must be between 1 and 10000, got %d", s.WebhookWorkers)
	case s.WebhookPerHost < 1 || s.WebhookPerCaller < 1:
		return fmt.Errorf("WebhookPerHost and WebhookPerCaller must be at least 1, got %d and %d", s.WebhookPerHost, s.WebhookPerCaller)
	case s.WebhookTimeout <= 0:
		return fmt.Errorf("WebhookTimeout must be positive, got %s", s.WebhookTimeout)
	case len(s.WebhookRetrySchedule) < 1 || len(s.WebhookRetrySchedule) > 100:
		return fmt.Errorf("WebhookRetrySchedule must list 1 to 100 durations, got %d", len(s.WebhookRetrySchedule))
	case s.WebhookMaxThrottles < 0:
		return fmt.Errorf("WebhookMaxThrottles must not be negative, got %d", s.WebhookMaxThrottles)
	}
	for _, d := range s.WebhookRetrySchedule {
		if d < 0 {
			return fmt.Errorf("WebhookRetrySchedule must not hold negative durations, got %s", d)
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

// ListRunTime is how long one run of a chunk starts new domains: the
// reviewed run time, and never more than half the job timeout.
func (s Settings) ListRunTime() time.Duration { return min(s.ListChunkRunTime, s.JobTimeout/2) }

// StoreRetryFor is how long one run keeps trying to store an answer that
// arrived: the answer was paid for, and a store that fails is a database
// restarting or failing over (under a minute). Half the job timeout, so
// that the run still ends inside it; an answer still not stored is kept by
// the process (classifier.Pipeline.Keep) for the job's next run.
func (s Settings) StoreRetryFor() time.Duration { return s.JobTimeout / 2 }

// WebhookMaxAttempts is how many times one delivery is tried: once, then
// once after each wait of the retry schedule.
func (s Settings) WebhookMaxAttempts() int { return len(s.WebhookRetrySchedule) + 1 }

// BatchClaimTTL is the lease on a domain staged for a batch: the batch's
// 24-hour window, the polls and the fallback after it.
func (s Settings) BatchClaimTTL() time.Duration {
	return 24*time.Hour + s.BatchPollInterval + s.ClaimTTL()
}

// ClaimTTL is the lease on a domain while one job asks the model about it:
// no job runs longer than JobTimeout, so a live claim never runs out under
// its owner, and a crashed owner's claim is free after it.
func (s Settings) ClaimTTL() time.Duration { return s.JobTimeout + time.Minute }
