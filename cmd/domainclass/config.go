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
	// Pool sizes (db/pools): DBMaxConns sizes each pool of the process
	// whose own size is not set; 0 everywhere is each role's default.
	DBMaxConns       int32
	APIDBMaxConns    int32 // the API's pool (api, all)
	WorkerDBMaxConns int32 // the workers' connections (worker, all)
	ListDBMaxConns   int32 // of them, list work's pool
	// APIDBTimeout bounds a short request's wait for Postgres (a
	// connection, then its queries) before it answers 503.
	APIDBTimeout time.Duration

	HTTPAddr   string
	WorkerAddr string

	OpenAIAPIKey      string
	OpenAIBaseURL     string
	OpenAIModel       string
	LLMResponseFormat string
	// LLMMaxConcurrency and LLMRatePerMinute are one worker process's own
	// caps, off when 0 (not set): the deployment's capacity decides
	// (modellimits.go).
	LLMMaxConcurrency int
	LLMRatePerMinute  int
	// The provider account's limits for the whole deployment (every worker
	// process leases a share); 0 is none, and the provider's stated limits
	// govern.
	LLMAccountRPM         int
	LLMAccountTPM         int
	LLMAccountConcurrency int
	LLMTimeout            time.Duration
	// LLMMaxCompletionTokens bounds one answer's tokens (max_completion_tokens).
	LLMMaxCompletionTokens int
	// EvidenceMaxChars bounds the web text one prompt carries.
	EvidenceMaxChars int

	SearchProvider     string
	SearchAllowPrivate bool
	SearchTimeout      time.Duration
	BraveAPIKey        string
	BraveBaseURL       string

	WebhookSecret        string
	CallbackAllowPrivate bool

	Auth            string
	AuthCacheTTL    time.Duration
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

	Queue     jobs.Settings
	Callers   httpapi.Limits
	Lists     httpapi.ListLimits
	Freshness classifier.Freshness
	ClaimWait time.Duration

	// Renamed says which old names of renamed variables the environment
	// sets (renamedEnv); a process logs it once as it starts.
	Renamed []string
}

// DefaultConfig returns the defaults: the binary's own, and each package's
// reviewed settings.
func DefaultConfig() Config {
	return Config{
		DatabaseURL:            DefaultDatabaseURL,
		HTTPAddr:               "127.0.0.1:8080",
		WorkerAddr:             "127.0.0.1:8081",
		OpenAIModel:            "gpt-5.4-mini",
		LLMTimeout:             llm.DefaultTimeout,
		LLMMaxCompletionTokens: llm.DefaultMaxCompletionTokens,
		EvidenceMaxChars:       classifier.DefaultEvidenceMaxChars,
		SearchProvider:         search.ProviderHomepage,
		SearchTimeout:          search.DefaultTimeout,
		Auth:                   "on",
		AuthCacheTTL:           httpapi.DefaultAuthCacheTTL,
		TraceTrustIncoming:     httpapi.DefaultTrustIncomingTrace,
		APIDBTimeout:           httpapi.DefaultDBTimeout,
		LogFormat:              "json",
		LogLevel:               "info",
		Queue:                  jobs.DefaultSettings(),
		Callers:                httpapi.DefaultLimits(),
		Lists:                  httpapi.DefaultListLimits(),
		Freshness:              classifier.DefaultFreshness(),
		ClaimWait:              classifier.DefaultClaimWait,
	}
}

// environment is the one table of environment variables: each one, and the
// setting it overrides. The defaults and their reasons are with the owners:
// jobs/settings.go (queues, attempts, timeouts, lists' chunks, webhooks),
// httpapi/limits.go (callers, list limits), classifier/freshness.go (cache), classifier/pipeline.go
// (CLAIM_WAIT), classifier/llm (model bounds and timeout),
// classifier/search (search timeout) and db/pools (the database pools).
func (c *Config) environment() []envvar.Var {
	return envvar.WithOld(slices.Concat(c.serviceEnv(), c.limitsEnv(), c.queueEnv()), renamedEnv)
}

// renamedEnv: the variables renamed, whose old names are read one release
// more, with a warning as a process starts, then no longer.
var renamedEnv = []envvar.Renamed{
	{Old: "LIST_CHUNK_BUDGET", New: "LIST_CHUNK_RUN_TIME"}, // issue 38: "budget" is callers' money only
}

// warnRenamed logs, once as a process starts, each old name it was given.
func (c Config) warnRenamed(log *slog.Logger) {
	for _, line := range c.Renamed {
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
		{"API_DB_MAX_CONNS", &c.APIDBMaxConns, "APIDBMaxConns"},
		{"WORKER_DB_MAX_CONNS", &c.WorkerDBMaxConns, "WorkerDBMaxConns"},
		{"LIST_DB_MAX_CONNS", &c.ListDBMaxConns, "ListDBMaxConns"},
		{"API_DB_TIMEOUT", &c.APIDBTimeout, ""},
		{"HTTP_ADDR", &c.HTTPAddr, ""},
		{"WORKER_ADDR", &c.WorkerAddr, ""},

		{"OPENAI_API_KEY", &c.OpenAIAPIKey, ""},
		{"OPENAI_BASE_URL", &c.OpenAIBaseURL, ""},
		{"OPENAI_MODEL", &c.OpenAIModel, ""},
		{"LLM_RESPONSE_FORMAT", &c.LLMResponseFormat, ""},
		{"LLM_MAX_CONCURRENCY", &c.LLMMaxConcurrency, ""},
		{"LLM_RATE_PER_MINUTE", &c.LLMRatePerMinute, ""},
		{"LLM_ACCOUNT_RPM", &c.LLMAccountRPM, ""},
		{"LLM_ACCOUNT_TPM", &c.LLMAccountTPM, ""},
		{"LLM_ACCOUNT_CONCURRENCY", &c.LLMAccountConcurrency, ""},
		{"LLM_TIMEOUT", &c.LLMTimeout, ""},
		{"LLM_MAX_COMPLETION_TOKENS", &c.LLMMaxCompletionTokens, ""},
		{"EVIDENCE_MAX_CHARS", &c.EvidenceMaxChars, ""},

		{"SEARCH_PROVIDER", &c.SearchProvider, ""},
		{"SEARCH_ALLOW_PRIVATE", &c.SearchAllowPrivate, ""},
		{"SEARCH_TIMEOUT", &c.SearchTimeout, ""},
		{"BRAVE_API_KEY", &c.BraveAPIKey, ""},
		{"BRAVE_BASE_URL", &c.BraveBaseURL, ""},

		{"WEBHOOK_SECRET", &c.WebhookSecret, ""},
		{"CALLBACK_ALLOW_PRIVATE", &c.CallbackAllowPrivate, ""},
		{"AUTH", &c.Auth, ""},
		{"AUTH_CACHE_TTL", &c.AuthCacheTTL, ""},
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

// limitsEnv: the callers' and the lists' limits, the cache's freshness.
func (c *Config) limitsEnv() []envvar.Var {
	return []envvar.Var{
		{"CALLER_RATE_PER_MINUTE", &c.Callers.RatePerMinute, "RatePerMinute"},
		{"CALLER_MAX_QUEUED_DOMAINS", &c.Callers.MaxQueuedDomains, "MaxQueuedDomains"},
		{"CALLER_MAX_STORED_ROWS", &c.Callers.MaxStoredRows, "MaxStoredRows"},

		{"LIST_MAX_BYTES", &c.Lists.MaxBytes, "MaxBytes"},
		{"LIST_MAX_DOMAINS", &c.Lists.MaxRows, "MaxRows"},
		{"CALLER_MAX_ACTIVE_LISTS", &c.Lists.MaxActive, "MaxActive"},
		{"LIST_UPLOADS_PER_PROCESS", &c.Lists.MaxUploads, "MaxUploads"},
		{"CALLER_MAX_UPLOADS", &c.Lists.CallerMaxUploads, "CallerMaxUploads"},
		{"LIST_UPLOAD_MIN_RATE", &c.Lists.UploadMinRate, "UploadMinRate"},
		{"LIST_UPLOAD_RATE_WINDOW", &c.Lists.UploadRateWindow, "UploadRateWindow"},
		{"LIST_DOWNLOADS_PER_PROCESS", &c.Lists.MaxDownloads, "MaxDownloads"},
		{"CALLER_MAX_DOWNLOADS", &c.Lists.CallerMaxDownloads, "CallerMaxDownloads"},
		{"LIST_DOWNLOAD_MIN_RATE", &c.Lists.DownloadMinRate, "DownloadMinRate"},
		{"LIST_DOWNLOAD_RATE_WINDOW", &c.Lists.DownloadRateWindow, "DownloadRateWindow"},
		{"LIST_SPOOL_DIR", &c.Lists.SpoolDir, "SpoolDir"},

		{"CACHE_TTL_HIGH", &c.Freshness.High, "High"},
		{"CACHE_TTL_MEDIUM", &c.Freshness.Medium, "Medium"},
		{"CACHE_TTL_LOW", &c.Freshness.Low, "Low"},
		{"CLAIM_WAIT", &c.ClaimWait, ""},
	}
}

// queueEnv: the queues' settings (jobs.Settings).
func (c *Config) queueEnv() []envvar.Var {
	q := &c.Queue
	return []envvar.Var{
		{"CLASSIFY_WORKERS", &q.ClassifyWorkers, "ClassifyWorkers"},
		{"DOMAIN_CONCURRENCY", &q.DomainConcurrency, "DomainConcurrency"},
		{"JOB_MAX_ATTEMPTS", &q.MaxAttempts, "MaxAttempts"},
		{"JOB_TIMEOUT", &q.JobTimeout, "JobTimeout"},
		{"RESCUE_STUCK_AFTER", &q.RescueStuckAfter, "RescueStuckAfter"},
		{"PROCESS_LEASE_TTL", &q.ProcessLeaseTTL, "ProcessLeaseTTL"},
		{"SOFT_STOP_TIMEOUT", &q.SoftStopTimeout, "SoftStopTimeout"},
		{"RETENTION_COMPLETED", &q.CompletedRetention, "CompletedRetention"},
		{"JOB_RETENTION", &q.JobRetention, "JobRetention"},
		{"LIST_RETENTION", &q.ListRetention, "ListRetention"},
		{"RETENTION_CANCELLED", &q.CancelledRetention, "CancelledRetention"},
		{"RETENTION_DISCARDED", &q.DiscardedRetention, "DiscardedRetention"},
		{"BUSY_SNOOZE", &q.BusySnooze, "BusySnooze"},
		{"MAX_SNOOZE", &q.MaxSnooze, "MaxSnooze"},
		{"QUEUE_METRICS_INTERVAL", &q.QueueMetricsInterval, "QueueMetricsInterval"},
		{"LIST_WORKERS", &q.ListWorkers, "ListWorkers"},
		{"LIST_DOMAIN_CONCURRENCY", &q.ListDomainConcurrency, "ListDomainConcurrency"},
		{"LIST_CHUNK_ROWS", &q.ListChunkRows, "ListChunkRows"},
		{"LIST_CHUNKS_IN_FLIGHT", &q.ListChunksInFlight, "ListChunksInFlight"},
		{"LIST_CHUNK_RUN_TIME", &q.ListChunkRunTime, "ListChunkRunTime"},
		{"LIST_SWEEP_INTERVAL", &q.ListSweepInterval, "ListSweepInterval"},
		{"DOMAIN_ATTEMPTS", &q.DomainAttempts, "DomainAttempts"},
		{"DOMAIN_RETRY_BACKOFF", &q.DomainRetryBackoff, "DomainRetryBackoff"},
		{"BATCH_MAX_REQUESTS", &q.BatchMaxRequests, "BatchMaxRequests"},
		{"BATCH_POLL_INTERVAL", &q.BatchPollInterval, "BatchPollInterval"},
		{"BATCH_MAX_ATTEMPTS", &q.BatchMaxAttempts, "BatchMaxAttempts"},
		{"WEBHOOK_WORKERS", &q.WebhookWorkers, "WebhookWorkers"},
		{"WEBHOOK_PER_HOST", &q.WebhookPerHost, "WebhookPerHost"},
		{"WEBHOOK_PER_CALLER", &q.WebhookPerCaller, "WebhookPerCaller"},
		{"WEBHOOK_TIMEOUT", &q.WebhookTimeout, "WebhookTimeout"},
		{"WEBHOOK_RETRY_SCHEDULE", &q.WebhookRetrySchedule, "WebhookRetrySchedule"},
		{"WEBHOOK_MAX_THROTTLES", &q.WebhookMaxThrottles, "WebhookMaxThrottles"},
		{"CHANGE_NOTIFY_WINDOW", &q.ChangeNotifyWindow, "ChangeNotifyWindow"},
		{"CHANGE_FANOUT_INTERVAL", &q.ChangeFanoutInterval, "ChangeFanoutInterval"},
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
	cfg.Renamed = envvar.OldSet(renamedEnv, env)
	return cfg, cfg.Validate()
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
	case c.LLMMaxCompletionTokens < 16:
		return errors.New("LLM_MAX_COMPLETION_TOKENS must be at least 16 (an answer is about 60 tokens)")
	case c.EvidenceMaxChars < 100:
		return errors.New("EVIDENCE_MAX_CHARS must be at least 100")
	case c.LLMTimeout <= 0 || c.SearchTimeout <= 0 || c.ClaimWait <= 0 || c.APIDBTimeout <= 0:
		return errors.New("LLM_TIMEOUT, SEARCH_TIMEOUT, CLAIM_WAIT and API_DB_TIMEOUT must be positive")
	case c.AuthCacheTTL < 0:
		return errors.New("AUTH_CACHE_TTL must not be negative")
	}
	if err := c.poolSizes().Validate(); err != nil {
		return errors.New(envvar.Rename(err.Error(), c.environment()))
	}
	if c.WebhookSecret != "" {
		if _, err := jobs.ParseWebhookSecret(c.WebhookSecret); err != nil {
			return fmt.Errorf("WEBHOOK_SECRET %v (make one with: echo whsec_$(openssl rand -base64 32))", err)
		}
	}
	vars := c.environment()
	for _, err := range []error{c.Queue.Validate(), c.Callers.Validate(), c.Lists.Validate(), c.Freshness.Validate()} {
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

// tracing reports whether traces are exported: OTEL_TRACES_EXPORTER=otlp,
// or an OTLP endpoint with no OTEL_TRACES_EXPORTER (none turns them off).
func (c Config) tracing() bool {
	switch c.TracesExporter {
	case "otlp":
		return true
	case "none":
		return false
	}
	return c.OTLPEndpoint != "" || c.OTLPTracesEndpoint != ""
}
