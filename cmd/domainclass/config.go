package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/envvar"
	"github.com/domainclass/domainclass/internal/logging"
	"github.com/domainclass/domainclass/jobs"
)

// DefaultDatabaseURL is the private cluster that `go tool task up` starts.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:54329/domainclass?sslmode=disable"

// Config is every setting of the binary, read once from the environment.
// Secrets are only ever passed on, never printed. The reviewed settings
// keep their defaults, and the reasons for them, beside the code that uses
// them; environment names only this package knows (see environment).
type Config struct {
	DatabaseURL    string
	DatabaseSchema string // holds all tables; "" = search_path
	// DBMaxConns sizes each of the process's pools (db/pools): the API's,
	// and the workers', of which list work's part is derived; 0 is each
	// role's default.
	DBMaxConns int32
	// APIDBTimeout bounds a short request's wait for Postgres (a
	// connection, then its queries) before it answers 503.
	APIDBTimeout time.Duration

	HTTPAddr   string
	WorkerAddr string

	OpenAIAPIKey  string
	OpenAIBaseURL string
	OpenAIModel   string
	// LLMMaxConcurrency and LLMRatePerMinute are one worker process's own
	// caps, off when 0 (not set): the deployment's capacity decides
	// (capacity/limits.go).
	LLMMaxConcurrency int
	LLMRatePerMinute  int
	// The provider account's limits for the whole deployment (every worker
	// process leases a share); 0 is none, and the provider's stated limits
	// govern.
	LLMAccountRPM         int
	LLMAccountTPM         int
	LLMAccountConcurrency int
	LLMTimeout            time.Duration

	SearchProvider string
	BraveAPIKey    string
	BraveBaseURL   string

	// CallbackAllowPrivate lets callback URLs reach private, loopback and
	// link-local addresses (and plain http); SearchAllowPrivate lets the
	// homepage search fetch them. Two variables, not one: a callback URL
	// comes from a caller holding a key, a homepage's address from whoever
	// controls the domain's DNS, so a deployment whose receivers live in
	// its own network must not open that network to every domain's owner.
	CallbackAllowPrivate bool
	SearchAllowPrivate   bool

	WebhookSecret string

	Auth            string
	RiverUIUser     string
	RiverUIPassword string

	LogFormat string
	LogLevel  string

	// OpenTelemetry traces: on when TracesExporter is "otlp", or unset with
	// an OTLP endpoint given; the exporter reads its other OTEL_* variables
	// (endpoint, headers, timeout) itself.
	TracesExporter     string
	OTLPEndpoint       string
	OTLPTracesEndpoint string
	// TraceTrustIncoming continues the trace context callers send
	// (httpapi.Config.TrustIncomingTrace); off, their traces are linked.
	TraceTrustIncoming bool

	Queue jobs.Settings
	// Callers are every caller's limits, all six in one struct
	// (httpapi.CallerLimits): the checks and GET /callers/me read them,
	// under a key's own.
	Callers httpapi.CallerLimits
	Lists   httpapi.ListLimits
	// ListMinRate and ListRateWindow are the slow-client bound of list
	// uploads and downloads alike (LIST_MIN_RATE, LIST_RATE_WINDOW): Lists'
	// UploadMinRate and DownloadMinRate, and their windows, are set from
	// them (slowClient).
	ListMinRate    int64
	ListRateWindow time.Duration
	Freshness      classifier.Freshness
	ClaimWait      time.Duration

	// EnvWarnings are the lines a process logs once as it starts: each old
	// name of a renamed variable (renamedEnv) and each variable no longer
	// read (removedEnv) that the environment sets.
	EnvWarnings []string
}

// DefaultConfig returns the defaults: the binary's own, and each package's
// reviewed settings.
func DefaultConfig() Config {
	return Config{
		DatabaseURL:        DefaultDatabaseURL,
		HTTPAddr:           "127.0.0.1:8080",
		WorkerAddr:         "127.0.0.1:8081",
		OpenAIModel:        "gpt-5.4-mini",
		LLMTimeout:         llm.DefaultTimeout,
		SearchProvider:     search.ProviderHomepage,
		Auth:               "on",
		TraceTrustIncoming: httpapi.DefaultTrustIncomingTrace,
		APIDBTimeout:       httpapi.DefaultDBTimeout,
		LogFormat:          "json",
		LogLevel:           "info",
		Queue:              jobs.DefaultSettings(),
		Callers:            httpapi.DefaultCallerLimits(),
		Lists:              httpapi.DefaultListLimits(),
		ListMinRate:        httpapi.DefaultListMinRate,
		ListRateWindow:     httpapi.DefaultListRateWindow,
		Freshness:          classifier.DefaultFreshness(),
		ClaimWait:          classifier.DefaultClaimWait,
	}
}

// environment is the one table of environment variables: each one, and the
// setting it overrides. The defaults and their reasons are with the owners:
// jobs/settings.go (queues, attempts, timeouts, lists' chunks, webhooks),
// httpapi/limits.go (callers, list limits), classifier/freshness.go (cache), classifier/pipeline.go
// (CLAIM_WAIT), classifier/llm (model bounds and timeout),
// classifier/search (search timeout) and db/pools (the database pools).
func (c *Config) environment() []envvar.Var {
	return envvar.WithOld(envTable(c), renamedEnv)
}

// envTable is the table without the old names of renamed variables.
func envTable(c *Config) []envvar.Var {
	return slices.Concat(c.serviceEnv(), c.callerEnv(), c.limitsEnv(), c.queueEnv())
}

// renamedEnv: the variables renamed, whose old names are read one release
// more, with a warning as a process starts, then no longer.
var renamedEnv = []envvar.Renamed{
	// issue 38: one variable where two said the same thing.
	{Old: "LIST_UPLOAD_MIN_RATE", New: "LIST_MIN_RATE"},
	{Old: "LIST_DOWNLOAD_MIN_RATE", New: "LIST_MIN_RATE"},
	{Old: "LIST_UPLOAD_RATE_WINDOW", New: "LIST_RATE_WINDOW"},
	{Old: "LIST_DOWNLOAD_RATE_WINDOW", New: "LIST_RATE_WINDOW"},
}

// removedEnv: the variables no longer read (issue 38), and what replaces
// each; a process that is still given one says so once as it starts. A
// reviewed constant keeps its value and its reason beside the code that
// uses it (the Default* constants the lines name).
var removedEnv = []envvar.Removed{
	{Name: "API_DB_MAX_CONNS", Instead: "DB_MAX_CONNS sizes each role's pool"},
	{Name: "WORKER_DB_MAX_CONNS", Instead: "DB_MAX_CONNS sizes each role's pool"},
	{Name: "LIST_DB_MAX_CONNS", Instead: "list work's part of the workers' pool is derived (db/pools Sizes.List)"},
	{Name: "LLM_RESPONSE_FORMAT", Instead: "auto, stepping down per model (classifier/llm)"},
	{Name: "LLM_MAX_COMPLETION_TOKENS", Instead: "a reviewed constant (llm.DefaultMaxCompletionTokens)"},
	{Name: "EVIDENCE_MAX_CHARS", Instead: "a reviewed constant (classifier.DefaultEvidenceMaxChars)"},
	{Name: "SEARCH_TIMEOUT", Instead: "a reviewed constant (search.DefaultTimeout)"},
	{Name: "AUTH_CACHE_TTL", Instead: "a reviewed constant (httpapi.DefaultAuthCacheTTL, 5s)"},
	{Name: "CACHE_TTL_HIGH", Instead: "a reviewed constant (classifier.DefaultFreshness)"},
	{Name: "CACHE_TTL_MEDIUM", Instead: "a reviewed constant (classifier.DefaultFreshness)"},
	{Name: "CACHE_TTL_LOW", Instead: "a reviewed constant (classifier.DefaultFreshness)"},
	{Name: "DOMAIN_CONCURRENCY", Instead: "a reviewed constant (jobs.DefaultDomainConcurrency)"},
	{Name: "RETENTION_COMPLETED", Instead: "a reviewed constant (jobs.DefaultCompletedRetention)"},
	{Name: "RETENTION_CANCELLED", Instead: "a reviewed constant (jobs.DefaultCancelledRetention)"},
	{Name: "RETENTION_DISCARDED", Instead: "a reviewed constant (jobs.DefaultDiscardedRetention)"},
	{Name: "MAX_SNOOZE", Instead: "a reviewed constant (jobs.DefaultMaxSnooze)"},
	{Name: "QUEUE_METRICS_INTERVAL", Instead: "a reviewed constant (jobs.DefaultQueueMetricsInterval)"},
	{Name: "LIST_CHUNK_ROWS", Instead: "a reviewed constant (jobs.DefaultListChunkRows)"},
	{Name: "LIST_CHUNK_RUN_TIME", Instead: "a reviewed constant (jobs.DefaultListChunkRunTime)"},
	{Name: "LIST_CHUNK_BUDGET", Instead: "a reviewed constant (jobs.DefaultListChunkRunTime)"},
	{Name: "DOMAIN_RETRY_BACKOFF", Instead: "a reviewed constant (jobs.DefaultDomainRetryBackoff)"},
	{Name: "BATCH_MAX_ATTEMPTS", Instead: "a reviewed constant (jobs.DefaultBatchMaxAttempts)"},
	{Name: "WEBHOOK_WORKERS", Instead: "a reviewed constant (jobs.DefaultWebhookWorkers)"},
	{Name: "WEBHOOK_PER_HOST", Instead: "a reviewed constant (jobs.DefaultWebhookPerHost)"},
	{Name: "WEBHOOK_PER_CALLER", Instead: "a reviewed constant (jobs.DefaultWebhookPerCaller)"},
	{Name: "WEBHOOK_MAX_THROTTLES", Instead: "a reviewed constant (jobs.DefaultWebhookMaxThrottles)"},
	{Name: "CHANGE_NOTIFY_WINDOW", Instead: "a reviewed constant (jobs.DefaultChangeNotifyWindow)"},
	{Name: "CHANGE_FANOUT_INTERVAL", Instead: "a reviewed constant (jobs.DefaultChangeFanoutInterval)"},
}

// warnEnv logs, once as a process starts, each old or removed name it was
// given.
func (c Config) warnEnv(log *slog.Logger) {
	for _, line := range c.EnvWarnings {
		log.Warn(line)
	}
}

// serviceEnv: the process, its database, the model, search, security,
// tracing and logs.
func (c *Config) serviceEnv() []envvar.Var {
	return []envvar.Var{
		{"DATABASE_URL", &c.DatabaseURL, ""},
		{"DATABASE_SCHEMA", &c.DatabaseSchema, ""},
		{"DB_MAX_CONNS", &c.DBMaxConns, "DBMaxConns"},
		{"API_DB_TIMEOUT", &c.APIDBTimeout, ""},
		{"HTTP_ADDR", &c.HTTPAddr, ""},
		{"WORKER_ADDR", &c.WorkerAddr, ""},

		{"OPENAI_API_KEY", &c.OpenAIAPIKey, ""},
		{"OPENAI_BASE_URL", &c.OpenAIBaseURL, ""},
		{"OPENAI_MODEL", &c.OpenAIModel, ""},
		{"LLM_MAX_CONCURRENCY", &c.LLMMaxConcurrency, ""},
		{"LLM_RATE_PER_MINUTE", &c.LLMRatePerMinute, ""},
		{"LLM_ACCOUNT_RPM", &c.LLMAccountRPM, ""},
		{"LLM_ACCOUNT_TPM", &c.LLMAccountTPM, ""},
		{"LLM_ACCOUNT_CONCURRENCY", &c.LLMAccountConcurrency, ""},
		{"LLM_TIMEOUT", &c.LLMTimeout, ""},

		{"SEARCH_PROVIDER", &c.SearchProvider, ""},
		{"BRAVE_API_KEY", &c.BraveAPIKey, ""},
		{"BRAVE_BASE_URL", &c.BraveBaseURL, ""},

		{"WEBHOOK_SECRET", &c.WebhookSecret, ""},
		{"CALLBACK_ALLOW_PRIVATE", &c.CallbackAllowPrivate, ""},
		{"SEARCH_ALLOW_PRIVATE", &c.SearchAllowPrivate, ""},
		{"AUTH", &c.Auth, ""},
		{"RIVERUI_USER", &c.RiverUIUser, ""},
		{"RIVERUI_PASSWORD", &c.RiverUIPassword, ""},
		{"OTEL_TRACES_EXPORTER", &c.TracesExporter, ""},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", &c.OTLPEndpoint, ""},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &c.OTLPTracesEndpoint, ""},
		{"TRACE_TRUST_INCOMING", &c.TraceTrustIncoming, ""},
		{"LOG_FORMAT", &c.LogFormat, ""},
		{"LOG_LEVEL", &c.LogLevel, ""},
	}
}

// callerEnv: every caller's limits, one struct (httpapi.CallerLimits).
func (c *Config) callerEnv() []envvar.Var {
	return []envvar.Var{
		{"CALLER_RATE_PER_MINUTE", &c.Callers.RatePerMinute, "RatePerMinute"},
		{"CALLER_MAX_QUEUED_DOMAINS", &c.Callers.MaxQueuedDomains, "MaxQueuedDomains"},
		{"CALLER_MAX_STORED_ROWS", &c.Callers.MaxStoredRows, "MaxStoredRows"},
		{"CALLER_MAX_ACTIVE_LISTS", &c.Callers.MaxActiveLists, "MaxActiveLists"},
		{"CALLER_MAX_UPLOADS", &c.Callers.MaxUploads, "MaxUploads"},
		{"CALLER_MAX_DOWNLOADS", &c.Callers.MaxDownloads, "MaxDownloads"},
	}
}

// limitsEnv: the process's list limits, and the claim wait.
func (c *Config) limitsEnv() []envvar.Var {
	return []envvar.Var{
		{"LIST_MAX_BYTES", &c.Lists.MaxBytes, "MaxBytes"},
		{"LIST_MAX_DOMAINS", &c.Lists.MaxRows, "MaxRows"},
		{"LIST_UPLOADS_PER_PROCESS", &c.Lists.MaxUploads, "MaxUploads"},
		{"LIST_DOWNLOADS_PER_PROCESS", &c.Lists.MaxDownloads, "MaxDownloads"},
		{"LIST_MIN_RATE", &c.ListMinRate, ""},
		{"LIST_RATE_WINDOW", &c.ListRateWindow, ""},
		{"LIST_SPOOL_DIR", &c.Lists.SpoolDir, "SpoolDir"},

		{"CLAIM_WAIT", &c.ClaimWait, ""},
	}
}

// queueEnv: the queues' settings (jobs.Settings).
func (c *Config) queueEnv() []envvar.Var {
	q := &c.Queue
	return []envvar.Var{
		{"CLASSIFY_WORKERS", &q.ClassifyWorkers, "ClassifyWorkers"},
		{"JOB_MAX_ATTEMPTS", &q.MaxAttempts, "MaxAttempts"},
		{"JOB_TIMEOUT", &q.JobTimeout, "JobTimeout"},
		{"RESCUE_STUCK_AFTER", &q.RescueStuckAfter, "RescueStuckAfter"},
		{"PROCESS_LEASE_TTL", &q.ProcessLeaseTTL, "ProcessLeaseTTL"},
		{"SOFT_STOP_TIMEOUT", &q.SoftStopTimeout, "SoftStopTimeout"},
		{"JOB_RETENTION", &q.JobRetention, "JobRetention"},
		{"LIST_RETENTION", &q.ListRetention, "ListRetention"},
		{"BUSY_SNOOZE", &q.BusySnooze, "BusySnooze"},
		{"LIST_WORKERS", &q.ListWorkers, "ListWorkers"},
		{"LIST_DOMAIN_CONCURRENCY", &q.ListDomainConcurrency, "ListDomainConcurrency"},
		{"LIST_CHUNKS_IN_FLIGHT", &q.ListChunksInFlight, "ListChunksInFlight"},
		{"LIST_SWEEP_INTERVAL", &q.ListSweepInterval, "ListSweepInterval"},
		{"DOMAIN_ATTEMPTS", &q.DomainAttempts, "DomainAttempts"},
		{"BATCH_MAX_REQUESTS", &q.BatchMaxRequests, "BatchMaxRequests"},
		{"BATCH_POLL_INTERVAL", &q.BatchPollInterval, "BatchPollInterval"},
		{"WEBHOOK_TIMEOUT", &q.WebhookTimeout, "WebhookTimeout"},
		{"WEBHOOK_RETRY_SCHEDULE", &q.WebhookRetrySchedule, "WebhookRetrySchedule"},
	}
}

// LoadConfig reads the environment over the defaults. It returns one clear
// error, naming the variable, for a value that cannot be read or is out of
// range.
func LoadConfig(environ []string) (Config, error) {
	cfg := DefaultConfig()
	env, err := envvar.Read(cfg.environment(), environ)
	if err != nil {
		return cfg, err
	}
	cfg.slowClient()
	cfg.EnvWarnings = append(envvar.OldSet(renamedEnv, env), envvar.Unread(removedEnv, env)...)
	return cfg, cfg.Validate()
}

// slowClient sets the uploads' and the downloads' slow-client bound from
// the one pair of variables: a client that keeps up less than a modem's
// pace is let go the same way whichever way the bytes flow.
func (cfg *Config) slowClient() {
	cfg.Lists.UploadMinRate, cfg.Lists.DownloadMinRate = cfg.ListMinRate, cfg.ListMinRate
	cfg.Lists.UploadRateWindow, cfg.Lists.DownloadRateWindow = cfg.ListRateWindow, cfg.ListRateWindow
}

// Validate checks the values parsing cannot: the binary's own, and each
// owner's settings (their messages name the environment variables).
func (c Config) Validate() error {
	switch c.Auth {
	case "on", "off":
	default:
		return fmt.Errorf("AUTH must be on or off, got %q", c.Auth)
	}
	if err := logging.Check(c.LogFormat, c.LogLevel); err != nil {
		return err
	}
	switch {
	case (c.RiverUIUser == "") != (c.RiverUIPassword == ""):
		return errors.New("set both RIVERUI_USER and RIVERUI_PASSWORD, or neither")
	case c.SearchProvider == search.ProviderBrave && c.BraveAPIKey == "":
		return errors.New("SEARCH_PROVIDER=brave needs BRAVE_API_KEY")
	case c.LLMMaxConcurrency < 0 || c.LLMRatePerMinute < 0:
		return errors.New("LLM_MAX_CONCURRENCY and LLM_RATE_PER_MINUTE must not be negative (0: not set, the deployment's capacity decides)")
	case c.LLMAccountRPM < 0 || c.LLMAccountTPM < 0 || c.LLMAccountConcurrency < 0:
		return errors.New("LLM_ACCOUNT_RPM, LLM_ACCOUNT_TPM and LLM_ACCOUNT_CONCURRENCY must not be negative (0: no limit)")
	case c.TracesExporter != "" && c.TracesExporter != "otlp" && c.TracesExporter != "none":
		return fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none, got %q", c.TracesExporter)
	case c.LLMTimeout <= 0 || c.ClaimWait <= 0 || c.APIDBTimeout <= 0:
		return errors.New("LLM_TIMEOUT, CLAIM_WAIT and API_DB_TIMEOUT must be positive")
	case c.ListMinRate < 1 || c.ListRateWindow < time.Second:
		return errors.New("LIST_MIN_RATE must be at least 1 and LIST_RATE_WINDOW at least 1s")
	}
	if err := c.poolSizes().Validate(); err != nil {
		return errors.New(envvar.Rename(err.Error(), c.environment()))
	}
	if c.WebhookSecret != "" {
		if _, err := jobs.ParseWebhookSecret(c.WebhookSecret); err != nil {
			return fmt.Errorf("WEBHOOK_SECRET %v (make one with: echo whsec_$(openssl rand -base64 32))", err)
		}
	}
	// The callers' messages are renamed apart: their field names are the
	// lists' too (MaxUploads, MaxDownloads), for the process's bounds.
	if err := c.Callers.Validate(); err != nil {
		return errors.New(envvar.Rename(err.Error(), c.callerEnv()))
	}
	vars := envvar.WithOld(slices.Concat(c.serviceEnv(), c.limitsEnv(), c.queueEnv()), renamedEnv)
	for _, err := range []error{c.Queue.Validate(), c.Lists.Validate(), c.Freshness.Validate()} {
		if err != nil {
			return errors.New(envvar.Rename(err.Error(), vars))
		}
	}
	return nil
}

// checkSpoolDir is ListLimits.CheckSpoolDir in the environment's names:
// the processes that read uploads (api, all) check their spool directory
// as they start.
func (c Config) checkSpoolDir() error {
	if err := c.Lists.CheckSpoolDir(); err != nil {
		return errors.New(envvar.Rename(err.Error(), c.environment()))
	}
	return nil
}

// NewLogger returns the process logger: JSON (or text) on w.
func (c Config) NewLogger(w io.Writer) *slog.Logger { return logging.New(w, c.LogFormat, c.LogLevel) }

// openDB opens a small pool for a command (migrate, override import, jobs, apikey).
func (c Config) openDB(ctx context.Context, command string, maxConns int32) (*db.DB, error) {
	return db.Open(ctx, db.Config{URL: c.DatabaseURL, Schema: c.DatabaseSchema, MaxConns: maxConns,
		ApplicationName: "domainclass-" + command})
}
