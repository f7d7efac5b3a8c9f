package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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
	// full-size lists (DefaultListMaxRows): the three a caller may run at
	// once (CALLER_MAX_ACTIVE_LISTS) and two ended ones, or a hundred
	// 50k-account exports a month. An answered row takes about 480 bytes
	// of list_row with its indexes and TOAST (one evidence address) to 750
	// (five), and a fresh model answer about 1 KB more of result and
	// provenance (measured on 100,000 rows: go test -tags bench -run
	// TestListRowStorage ./db/), so that is about 2.4–3.8 GB of one
	// caller's list rows at most, up to about 9 GB with their answers,
	// where before nothing bounded it (a 1 MB gzip of junk rows stored 394
	// MB, again and again). Lower it for a small disk.
	DefaultCallerMaxStoredRows = 5_000_000
	// DefaultAuthCacheTTL: a key's lookup is reused this long, so an API
	// process does one key query per caller per 5 s under load, and a revoked
	// key stops working within 5 s. A constant, not a variable (issue 38):
	// `apikey revoke` promises this figure, and shorter only costs queries.
	DefaultAuthCacheTTL = 5 * time.Second
)

// CallerLimits are one caller's limits, all of them: what the checks of its
// requests read and what GET /callers/me reports, from the one struct. The
// deployment's (Config.Callers, from the CALLER_* variables) hold for every
// caller; a key may override the first three (`domainclass apikey limits`),
// and the server puts the two together as it resolves the caller
// (requireCaller). A caller's daily model budget is not a limit of this
// kind: it is counted against its day's usage (caller_budget, db.CallerToday).
type CallerLimits struct {
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
	// MaxActiveLists is how many of its lists may be not yet ended (its
	// uploads in progress that would be lists count too).
	MaxActiveLists int
	// MaxUploads and MaxDownloads bound its list uploads read, and its
	// result downloads sent, at once by one API process.
	MaxUploads, MaxDownloads int
}

// DefaultCallerLimits are the reviewed defaults.
func DefaultCallerLimits() CallerLimits {
	return CallerLimits{RatePerMinute: DefaultCallerRatePerMinute, MaxQueuedDomains: DefaultCallerMaxQueuedDomains,
		MaxStoredRows: DefaultCallerMaxStoredRows, MaxActiveLists: DefaultCallerMaxActiveLists,
		MaxUploads: DefaultCallerMaxUploads, MaxDownloads: DefaultCallerMaxDownloads}
}

// Validate returns an error for a limit below 1.
func (l CallerLimits) Validate() error {
	if l.RatePerMinute < 1 || l.MaxQueuedDomains < 1 || l.MaxStoredRows < 1 {
		return errors.New("RatePerMinute, MaxQueuedDomains and MaxStoredRows must be at least 1")
	}
	if l.MaxActiveLists < 1 || l.MaxUploads < 1 || l.MaxDownloads < 1 {
		return errors.New("MaxActiveLists, MaxUploads and MaxDownloads must be at least 1")
	}
	return nil
}

// over returns l with each limit it does not set (0) taken from def: a
// key's own limits over the deployment's.
func (l CallerLimits) over(def CallerLimits) CallerLimits {
	return CallerLimits{RatePerMinute: cmpOr(l.RatePerMinute, def.RatePerMinute),
		MaxQueuedDomains: cmpOr(l.MaxQueuedDomains, def.MaxQueuedDomains), MaxStoredRows: cmpOr(l.MaxStoredRows, def.MaxStoredRows),
		MaxActiveLists: cmpOr(l.MaxActiveLists, def.MaxActiveLists), MaxUploads: cmpOr(l.MaxUploads, def.MaxUploads),
		MaxDownloads: cmpOr(l.MaxDownloads, def.MaxDownloads)}
}

// The reviewed list limits (LIST_MAX_BYTES, CALLER_MAX_ACTIVE_LISTS;
// CALLER_MAX_STORED_ROWS is with the callers'). The row cap is a constant:
// LIST_MAX_BYTES bounds what an upload may hold.
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
)

// The reviewed slow-client bound of list uploads and downloads alike
// (LIST_MIN_RATE, LIST_RATE_WINDOW): one pair, since a client that keeps up
// less than a modem's pace is as costly whichever way the bytes flow.
const (
	// DefaultListMinRate: the bytes a second (as sent, compressed or not)
	// an upload must keep up over each window, or it is ended with 408;
	// the bytes a second a download's client must take, measured over each
	// window's worth of bytes (8 KiB/s × 20 s = 160 KiB, to be taken within
	// 20 s), or the download is cut off (the client sees it break, and may
	// resume with ?after=). 8 KiB/s is 64 kbit/s: a modem's pace; a slow
	// office uplink (1 Mbit/s) sends 15 times that. A caller trickling a
	// byte a second, or a reader that stops, is let go within a window.
	DefaultListMinRate = 8 << 10
	// DefaultListRateWindow: the window the rate is measured over. TCP
	// retransmissions stall a healthy connection for a second or a few on
	// a lossy link; 20 s rides them out, and ends a trickle 20 s after its
	// last good window.
	DefaultListRateWindow = 20 * time.Second
)

// The reviewed upload bounds (LIST_UPLOADS_PER_PROCESS, CALLER_MAX_UPLOADS,
// LIST_SPOOL_DIR; the slow-client bound above). An upload
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
	// caller has at most CALLER_MAX_ACTIVE_LISTS (3) lists anyway. A
	// caller's second upload takes a place only while a quarter of
	// LIST_UPLOADS_PER_PROCESS stays free (uploadGate), so slow callers with
	// two each hold six of eight at most, and two more callers get in.
	DefaultCallerMaxUploads = 2
	// uploadsRetryAfter is the Retry-After of a refusal for too many
	// uploads at once: an upload's rows are stored seconds after its last
	// byte arrives (a million rows: 2–5 s).
	uploadsRetryAfter = 10 * time.Second
)

// The reviewed download bounds (LIST_DOWNLOADS_PER_PROCESS,
// CALLER_MAX_DOWNLOADS; the slow-client bound above).
// A results download reads its rows a page at a time, each page on a
// connection taken for its query and given back before the page is
// written, so a slow reader holds a socket, a goroutine and one page of
// encoded rows, never a connection. These bound how many of those there
// are, and for how long.
const (
	// DefaultListDownloadsPerProcess: result downloads one API process
	// sends at once. Each holds two pages of encoded rows (the one written,
	// the one read ahead: about 1 MiB each, resultsPageBytes), so 32 hold
	// about 70 MiB at worst; a slow one costs little else. One download at full speed already takes most of
	// two cores (its page queries and its encoding), so more at once only
	// share them. A 33rd is told to come back (429).
	DefaultListDownloadsPerProcess = 32
	// DefaultCallerMaxDownloads: one caller's downloads sent at once by one
	// process. A caller has at most CALLER_MAX_ACTIVE_LISTS (3) lists
	// running and reads each once, or resumes one with ?after=; four lets a
	// script fetch its lists side by side, and eight callers share the 32.
	DefaultCallerMaxDownloads = 4
	// downloadsRetryAfter is the Retry-After of a refusal for too many
	// downloads at once: a million rows stream in seconds on a fast link.
	downloadsRetryAfter = 10 * time.Second
)

// ListLimits are the list routes' limits for the process; a caller's own
// (its active lists, its uploads and downloads at once) are its
// CallerLimits.
type ListLimits struct {
	MaxBytes int64
	MaxRows  int
	// MaxUploads bounds the uploads read at once by this process, dry runs
	// included; counted before a byte of the body is read.
	MaxUploads int
	// UploadMinRate (bytes a second, as sent) must be kept up over each
	// UploadRateWindow, or the upload is ended with 408.
	UploadMinRate    int64
	UploadRateWindow time.Duration
	// MaxDownloads bounds the result downloads sent at once by this
	// process.
	MaxDownloads int
	// DownloadMinRate (bytes a second) must be kept up by a download's
	// client: each DownloadMinRate × DownloadRateWindow bytes written must
	// be taken within DownloadRateWindow, or the download is cut off.
	DownloadMinRate    int64
	DownloadRateWindow time.Duration
	// SpoolDir holds the uploads' spool files, and the answers of those
	// looked up (db.ListRowsAccept), each deleted as soon as it is created
	// (it lives while its request does); "" is os.TempDir().
	SpoolDir string
}

// DefaultListLimits are the reviewed list limits.
func DefaultListLimits() ListLimits {
	return ListLimits{MaxBytes: DefaultListMaxBytes, MaxRows: DefaultListMaxRows,
		MaxUploads: DefaultListUploadsPerProcess, UploadMinRate: DefaultListMinRate, UploadRateWindow: DefaultListRateWindow,
		MaxDownloads: DefaultListDownloadsPerProcess, DownloadMinRate: DefaultListMinRate, DownloadRateWindow: DefaultListRateWindow, SpoolDir: os.TempDir()}
}

// Validate returns an error for a limit below 1.
func (l ListLimits) Validate() error {
	if l.MaxBytes < 1 || l.MaxRows < 1 {
		return errors.New("MaxBytes and MaxRows must be at least 1")
	}
	if l.MaxUploads < 1 || l.UploadMinRate < 1 {
		return errors.New("MaxUploads and UploadMinRate must be at least 1")
	}
	if l.UploadRateWindow < time.Second {
		return errors.New("UploadRateWindow must be at least 1s")
	}
	if l.MaxDownloads < 1 || l.DownloadMinRate < 1 {
		return errors.New("MaxDownloads and DownloadMinRate must be at least 1")
	}
	if l.DownloadRateWindow < time.Second {
		return errors.New("DownloadRateWindow must be at least 1s")
	}
	return nil
}

// CheckSpoolDir returns an error, naming SpoolDir and what to set, when an
// upload's spool file cannot be made in SpoolDir ("" is os.TempDir()). The
// processes that read uploads check it as they start, not the others (a
// migration or a worker spools nothing), so an API whose directory is
// missing or read-only says so at once instead of failing every upload.
func (l ListLimits) CheckSpoolDir() error {
	dir := l.withDefaults().SpoolDir
	sp, err := newSpool(dir, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("SpoolDir %s: %v; set SpoolDir (default: TMPDIR, else /tmp) to an existing directory, "+
			"on a disk, that this process may write: list uploads are spooled there", dir, err)
	}
	return sp.Close()
}

// ListCounters count, for metrics, the rows made final here (rejected or
// answered at upload, cancelled), the domains an upload answered, and the
// lists ended here (cancelled); a nil func counts nothing.
type ListCounters struct {
	Rows  func(status classifier.Status, n int)
	Ended func(status classifier.Status)
	// Answered counts n domains of a classifier an upload answered from
	// source (an override, the cache).
	Answered func(classifierName string, source classifier.Source, n int)
}

// OnAnswered counts n domains an upload answered from source.
func (c ListCounters) OnAnswered(classifierName string, source classifier.Source, n int) {
	if c.Answered != nil && n > 0 {
		c.Answered(classifierName, source, n)
	}
}

// OnRows counts n rows made final with status.
func (c ListCounters) OnRows(status classifier.Status, n int) {
	if c.Rows != nil && n > 0 {
		c.Rows(status, n)
	}
}

// OnEnded counts a list that ended with status.
func (c ListCounters) OnEnded(status classifier.Status) {
	if c.Ended != nil {
		c.Ended(status)
	}
}

// withDefaults is cfg with each setting left zero set to its default, the
// one place the API's defaults are applied (tests and embedders set only
// what they care about; cmd/domainclass starts from the same Default*).
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Auth == nil {
		cfg.Auth = AuthNone{}
	}
	if cfg.DBTimeout <= 0 {
		cfg.DBTimeout = DefaultDBTimeout
	}
	cfg.Lists = cfg.Lists.withDefaults()
	cfg.Callers = cfg.Callers.over(DefaultCallerLimits())
	def := jobs.DefaultSettings()
	if cfg.Queue.ListChunkRows <= 0 {
		cfg.Queue = def
	}
	if cfg.Queue.ListRetention <= 0 {
		cfg.Queue.ListRetention = def.ListRetention
	}
	cfg.Estimate = cfg.Estimate.withDefaults()
	return cfg
}

func (l ListLimits) withDefaults() ListLimits {
	def := DefaultListLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = def.MaxBytes
	}
	l.MaxRows = cmpOr(l.MaxRows, def.MaxRows)
	l.MaxUploads = cmpOr(l.MaxUploads, def.MaxUploads)
	if l.UploadMinRate <= 0 || l.UploadRateWindow <= 0 {
		l.UploadMinRate, l.UploadRateWindow = def.UploadMinRate, def.UploadRateWindow
	}
	l.MaxDownloads = cmpOr(l.MaxDownloads, def.MaxDownloads)
	if l.DownloadMinRate <= 0 || l.DownloadRateWindow <= 0 {
		l.DownloadMinRate, l.DownloadRateWindow = def.DownloadMinRate, def.DownloadRateWindow
	}
	if l.SpoolDir == "" {
		l.SpoolDir = def.SpoolDir
	}
	return l
}
