package httpapi

import (
	"errors"
	"os"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/jobs"
)

// The reviewed per-caller limits and the key cache. Each value is a
// decision with a reason; change one in a reviewed commit, or per
// deployment through the environment (cmd/domainclass/config.go names the
// variables). `domainclass apikey limits` overrides the limits per key.
const (
	// DefaultCallerRatePerMinute: accepted POSTs per caller per minute (a
	// minute's worth may come at once). 120 jobs of up to 10 domains is far
	// more than a worker answers (≈ 3 fresh domains/s ≈ 180/min), so honest
	// batch clients never meet it; a runaway loop does, within a second.
	DefaultCallerRatePerMinute = 120
	// DefaultCallerMaxQueuedDomains: domains of one caller's jobs accepted
	// and not yet ended. 1000 is ≈ 5 minutes of one worker's fresh capacity (Little:
	// 1000 / 3 per s), so one caller's burst can delay the others by minutes,
	// not hours; cached domains drain in seconds.
	DefaultCallerMaxQueuedDomains = 1000
	// DefaultCallerMaxStoredRows: rows of one caller's lists kept at once,
	// running or ended and not yet purged (LIST_RETENTION). Five
	// full-size lists (LIST_MAX_DOMAINS): the three a caller may run at
	// once (CALLER_MAX_ACTIVE_LISTS) and two ended ones, or a hundred
	// 50k-account exports a month. An answered row takes about 420 bytes
	// with its indexes (measured), so that is about 2 GB of one caller's
	// rows at most, where before nothing bounded it (a 1 MB gzip of junk
	// rows stored 394 MB, again and again).
	DefaultCallerMaxStoredRows = 5_000_000
	// DefaultAuthCacheTTL: a key's lookup is reused this long, so an API
	// process does one key query per caller per 5 s under load, and a revoked
	// key stops working within 5 s.
	DefaultAuthCacheTTL = 5 * time.Second
)

// Limits are a caller's limits: the defaults, or its key's own.
type Limits struct {
	// RatePerMinute is how many jobs a caller may start a minute; it is
	// counted per API process.
	RatePerMinute int
	// MaxQueuedDomains is how many domains of its jobs may be accepted and
	// not yet ended; it is counted in Postgres (caller_queue), across
	// processes.
	MaxQueuedDomains int
	// MaxStoredRows is how many rows of its lists, ended or not, may be
	// kept until they are purged; it is summed in Postgres from the lists.
	MaxStoredRows int
}

// DefaultLimits are the reviewed defaults.
func DefaultLimits() Limits {
	return Limits{RatePerMinute: DefaultCallerRatePerMinute, MaxQueuedDomains: DefaultCallerMaxQueuedDomains,
		MaxStoredRows: DefaultCallerMaxStoredRows}
}

// Validate returns an error for a limit below 1.
func (l Limits) Validate() error {
	if l.RatePerMinute < 1 || l.MaxQueuedDomains < 1 || l.MaxStoredRows < 1 {
		return errors.New("RatePerMinute, MaxQueuedDomains and MaxStoredRows must be at least 1")
	}
	return nil
}

// The reviewed list limits (LIST_MAX_BYTES, LIST_MAX_DOMAINS,
// CALLER_MAX_ACTIVE_LISTS; CALLER_MAX_STORED_ROWS is with the callers').
const (
	// DefaultListMaxBytes: 256 MiB after decompression holds a million rows
	// of a CRM export with a few columns (≈ 100–250 bytes a row); it is
	// counted after gzip, so a small bomb stops there.
	DefaultListMaxBytes = 256 << 20
	// DefaultListMaxRows: a million rows, the largest export the service
	// answers in one request; the upload stays within 10 s on two cores
	// (docs/BENCHMARKS.md).
	DefaultListMaxRows = 1_000_000
	// DefaultCallerMaxActiveLists: a caller's lists not yet ended. Three
	// lets a team run a backfill, a weekly export and a test at once; more
	// would only queue behind one another.
	DefaultCallerMaxActiveLists = 3
	// DefaultCallSeconds is the estimate's time for one fresh domain before
	// any model call was measured: search ≈ 0.5–1 s and model ≈ 1.5 s.
	DefaultCallSeconds = 2.5
	// DefaultPromptTokens and DefaultCompletionTokens are the estimate's
	// tokens per call before any call was measured: the cpg prompt with a
	// homepage's evidence, and a one-line verdict.
	DefaultPromptTokens     = 800
	DefaultCompletionTokens = 60
)

// The reviewed upload bounds (LIST_UPLOADS_PER_PROCESS, CALLER_MAX_UPLOADS,
// LIST_UPLOAD_MIN_RATE, LIST_UPLOAD_RATE_WINDOW, LIST_SPOOL_DIR). An upload
// is read, decompressed, parsed and normalized into a spool file before it
// takes a database connection (then COPY runs at full speed), so a slow
// caller holds a socket, a file and some memory, never a connection. These
// bound how many of those there are, and for how long.
const (
	// DefaultListUploadsPerProcess: uploads read at once by one API process,
	// dry runs included. A million-row upload in progress holds its set of
	// distinct domains (about 40 MiB) and two cores parse about 500k rows a
	// second in all, so eight at once already queue for CPU and hold about
	// 320 MiB at worst; a ninth is told to come back (429).
	DefaultListUploadsPerProcess = 8
	// DefaultCallerMaxUploads: one caller's uploads read at once by one
	// process, dry runs included: a list and its estimate, or two lists. A
	// caller has at most CALLER_MAX_ACTIVE_LISTS (3) lists anyway, and two
	// of eight leaves the other six to three more callers.
	DefaultCallerMaxUploads = 2
	// DefaultListUploadMinRate: the bytes a second (as sent, compressed or
	// not) an upload must keep up over each LIST_UPLOAD_RATE_WINDOW, or it
	// is ended with 408. 8 KiB/s is 64 kbit/s: a modem's pace; a slow
	// office uplink (1 Mbit/s) sends 15 times that. A caller trickling a
	// byte a second is ended within a window.
	DefaultListUploadMinRate = 8 << 10
	// DefaultListUploadRateWindow: the window the rate is measured over.
	// TCP retransmissions stall a healthy connection for a second or a few
	// on a lossy link; 20 s rides them out, and ends a trickle 20 s after
	// its last good window.
	DefaultListUploadRateWindow = 20 * time.Second
	// uploadsRetryAfter is the Retry-After of a refusal for too many
	// uploads at once: an upload's rows are stored seconds after its last
	// byte arrives (a million rows: 2–5 s).
	uploadsRetryAfter = 10 * time.Second
)

// ListConfig configures the list routes.
type ListConfig struct {
	MaxBytes  int64
	MaxRows   int
	MaxActive int
	// MaxUploads and CallerMaxUploads bound the uploads read at once by this
	// process, in all and per caller, dry runs included; counted before a
	// byte of the body is read.
	MaxUploads       int
	CallerMaxUploads int
	// UploadMinRate (bytes a second, as sent) must be kept up over each
	// UploadRateWindow, or the upload is ended with 408.
	UploadMinRate    int64
	UploadRateWindow time.Duration
	// SpoolDir holds the uploads' spool files (each deleted as soon as it
	// is created: it lives while its request does); "" is os.TempDir().
	SpoolDir string
	// Queue holds the chunking (ListChunkRows, ListChunksInFlight) and the
	// webhooks' attempts, which an upload and a cancel use.
	Queue jobs.Settings
	// The estimate's inputs: the model and its price (per call, from its
	// tokens; nil or false: unknown), the bounds of one worker process, the
	// search's share of a call (the measured latency is the model's), and
	// the cache policy.
	Model              string
	Price              func(model string, promptTokens, completionTokens float64, batch bool) (usd float64, ok bool)
	ModelConcurrency   int
	ModelRatePerMinute int
	DefaultCallSeconds float64
	SearchSeconds      float64
	// Cores is the CPUs the rows' work shares (the service and Postgres);
	// 0 is this machine's.
	Cores     int
	Freshness classifier.Freshness
	// Rows and Ended, when set, count rows made final here (rejected at
	// upload, cancelled) and lists ended here (cancelled), for metrics.
	Rows  func(status classifier.Status, n int)
	Ended func(status classifier.Status)
}

// DefaultListConfig is the reviewed list limits, with the queue settings'
// chunking and the model bounds' defaults.
func DefaultListConfig() ListConfig {
	return ListConfig{MaxBytes: DefaultListMaxBytes, MaxRows: DefaultListMaxRows, MaxActive: DefaultCallerMaxActiveLists,
		MaxUploads: DefaultListUploadsPerProcess, CallerMaxUploads: DefaultCallerMaxUploads,
		UploadMinRate: DefaultListUploadMinRate, UploadRateWindow: DefaultListUploadRateWindow, SpoolDir: os.TempDir(),
		Queue: jobs.DefaultSettings(), ModelConcurrency: 8, ModelRatePerMinute: 300,
		DefaultCallSeconds: DefaultCallSeconds, Freshness: classifier.DefaultFreshness()}
}

// Validate returns an error for a limit below 1.
func (l ListConfig) Validate() error {
	if l.MaxBytes < 1 || l.MaxRows < 1 || l.MaxActive < 1 {
		return errors.New("MaxBytes, MaxRows and MaxActive must be at least 1")
	}
	if l.MaxUploads < 1 || l.CallerMaxUploads < 1 || l.UploadMinRate < 1 {
		return errors.New("MaxUploads, CallerMaxUploads and UploadMinRate must be at least 1")
	}
	if l.UploadRateWindow < time.Second {
		return errors.New("UploadRateWindow must be at least 1s")
	}
	if l.SpoolDir != "" {
		if fi, err := os.Stat(l.SpoolDir); err != nil || !fi.IsDir() {
			return errors.New("SpoolDir must be an existing directory")
		}
	}
	return nil
}

// OnRows counts n rows made final with status.
func (l ListConfig) OnRows(status classifier.Status, n int) {
	if l.Rows != nil && n > 0 {
		l.Rows(status, n)
	}
}

// OnEnded counts a list that ended with status.
func (l ListConfig) OnEnded(status classifier.Status) {
	if l.Ended != nil {
		l.Ended(status)
	}
}

// withDefaults is l with each field left zero set to its default (tests
// and embedders set only what they care about).
func (l ListConfig) withDefaults() ListConfig {
	def := DefaultListConfig()
	if l.MaxBytes <= 0 {
		l.MaxBytes = def.MaxBytes
	}
	if l.MaxRows <= 0 {
		l.MaxRows = def.MaxRows
	}
	if l.MaxActive <= 0 {
		l.MaxActive = def.MaxActive
	}
	if l.MaxUploads <= 0 {
		l.MaxUploads = def.MaxUploads
	}
	if l.CallerMaxUploads <= 0 {
		l.CallerMaxUploads = def.CallerMaxUploads
	}
	if l.UploadMinRate <= 0 || l.UploadRateWindow <= 0 {
		l.UploadMinRate, l.UploadRateWindow = def.UploadMinRate, def.UploadRateWindow
	}
	if l.SpoolDir == "" {
		l.SpoolDir = def.SpoolDir
	}
	if l.Queue.ListChunkRows <= 0 {
		l.Queue = def.Queue
	}
	if l.Queue.ListRetention <= 0 {
		l.Queue.ListRetention = def.Queue.ListRetention
	}
	if l.ModelConcurrency <= 0 || l.ModelRatePerMinute <= 0 {
		l.ModelConcurrency, l.ModelRatePerMinute = def.ModelConcurrency, def.ModelRatePerMinute
	}
	if l.DefaultCallSeconds <= 0 {
		l.DefaultCallSeconds = def.DefaultCallSeconds
	}
	if l.Freshness == (classifier.Freshness{}) {
		l.Freshness = def.Freshness
	}
	return l
}
