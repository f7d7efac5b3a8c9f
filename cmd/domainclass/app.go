package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"riverqueue.com/riverui"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/pools"
	"github.com/domainclass/domainclass/evals"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/logging"
	"github.com/domainclass/domainclass/internal/tracing"
	"github.com/domainclass/domainclass/jobs"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

// Main is a running service process: Run starts it, Close stops it. Tests
// drive the same Main on port 0.
type Main struct {
	Config Config
	Role   string
	Logger *slog.Logger
	// TestOnly makes River skip its start-up jitter.
	TestOnly bool
	// Traced instruments the process (HTTP, Postgres, River, the model,
	// webhooks) even when the configuration exports no traces: the caller
	// has installed a tracer provider of its own (a test's).
	Traced bool
	// QueryTracer, when set, sees every query of the process's pool (the
	// capacity bench counts statements with it).
	QueryTracer pgx.QueryTracer

	// DB and River are the API's (api, all): its pool, and an insert-only
	// River client on it (the handlers' inserts run in their own
	// transactions; River UI reads through it). In worker they are the
	// workers' own.
	DB    *db.DB
	River *jobs.Client
	// WorkerDB and WorkerRiver are the workers' (worker, all): the pool of
	// classify jobs, River and webhooks (list work has ListDB), and the
	// River client that works the queues on it. In `all` the API's pool is
	// apart, so that the API never waits behind a worker's connection (see
	// db/pools).
	WorkerDB    *db.DB
	WorkerRiver *jobs.Client
	// ListDB is the pool of the workers' list work (chunks and batches):
	// a draining list's statements never queue ahead of a classify job's.
	ListDB   *db.DB
	Registry *classifier.Registry
	// Metrics is this process's Prometheus registry, served on /metrics.
	Metrics        *prometheus.Registry
	QueueCollector *jobs.QueueCollector
	jobMetrics     *jobs.Metrics
	listMetrics    *jobs.ListMetrics

	apiServer    *http.Server
	apiLn        net.Listener
	workerServer *http.Server
	workerLn     net.Listener
	riverCancel  context.CancelFunc
	uiCancel     context.CancelFunc
	// budget is the worker's part of the deployment's model budget, renewed
	// until budgetStop.
	budget     *llm.Budget
	budgetStop func()
	// process is this worker process's id: its River client's, its model
	// lease's and its process lease's (jobs.ProcessLease), renewed until
	// leaseStop.
	process   string
	leaseStop func(clean bool)
	// limited bounds the worker's model calls; Close stops it first.
	limited     *llm.Limited
	stopTracing func(context.Context) error
	// outage collapses a database outage's lines (internal/logging).
	outage *logging.Outage
}

// NewMain returns a Main for role with cfg.
func NewMain(cfg Config, role string, logger *slog.Logger) *Main {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Main{Config: cfg, Role: role, Logger: logger, Registry: classifier.DefaultRegistry()}
}

func (m *Main) runsAPI() bool    { return m.Role == cli.RoleAPI || m.Role == cli.RoleAll }
func (m *Main) runsWorker() bool { return m.Role == cli.RoleWorker || m.Role == cli.RoleAll }

// Run opens the database, starts the River client and the HTTP listeners of
// the role, and returns once they serve. It does not migrate.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close(context.Background())
		}
	}()
	cfg := m.Config
	// An outage of the database reads as a few lines (internal/logging),
	// from River's and ours alike: the logger every part of the process gets.
	m.outage = logging.NewOutage(m.Logger.Handler())
	m.Logger = slog.New(m.outage.Handler())
	if m.runsAPI() {
		if err := cfg.checkSpoolDir(); err != nil {
			return err
		}
	}
	if cfg.tracing() {
		if m.stopTracing, err = tracing.Start(ctx, Version, m.Role); err != nil {
			return err
		}
	}
	traced := m.Traced || cfg.tracing()
	var pgTracer pgx.QueryTracer
	var riverMW []rivertype.Middleware
	if traced {
		pgTracer, riverMW = tracing.Postgres(), tracing.River()
	}
	if m.QueryTracer != nil {
		pgTracer = m.QueryTracer
	}
	if err := m.openPools(ctx, pgTracer); err != nil {
		return err
	}
	m.outage.Watch(m.DB.Ping)

	m.Metrics = prometheus.NewRegistry()
	m.Metrics.MustRegister(goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.QueueCollector = jobs.NewQueueCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger,
		jobs.QueueClassify, jobs.QueueList, jobs.QueueWebhook)
	m.Metrics.MustRegister(m.QueueCollector)
	m.Metrics.MustRegister(jobs.NewSpendCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger))
	m.Metrics.MustRegister(pools.NewCollector(m.poolsByName()))
	if m.runsAPI() { // the review queues and agreement, once per deployment's api
		m.Metrics.MustRegister(jobs.NewReviewCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger, m.Registry.Names()))
	}
	m.listMetrics = jobs.NewListMetrics(m.Metrics)
	// Registered by every role: the API counts the domains an upload
	// answers from overrides and the cache, as a worker counts its own.
	m.jobMetrics = jobs.NewMetrics(m.Metrics)

	riverConfig := jobs.ClientConfig{Settings: cfg.Queue, Logger: logging.Library(m.Logger, cfg.LogLevel),
		Schema: cfg.DatabaseSchema, TestOnly: m.TestOnly, Middleware: riverMW}
	if m.runsAPI() {
		if m.River, err = jobs.NewClient(m.DB.Pool, riverConfig); err != nil {
			return fmt.Errorf("error creating River client: %w", err)
		}
	}
	if m.runsWorker() {
		if err := m.startWorkers(ctx, riverConfig); err != nil {
			return err
		}
		if m.River == nil {
			m.River = m.WorkerRiver
		}
		if m.Role == cli.RoleWorker {
			if m.workerServer, m.workerLn, err = m.serve(cfg.WorkerAddr, m.workerHandler()); err != nil {
				return err
			}
			m.Logger.Info("worker serving health and metrics", "addr", "http://"+m.workerLn.Addr().String())
		}
	}
	if m.runsAPI() {
		h, err := m.apiHandler(ctx, traced)
		if err != nil {
			return err
		}
		if m.apiServer, m.apiLn, err = m.serve(cfg.HTTPAddr, h); err != nil {
			return err
		}
		m.Logger.Info("API listening", "url", "http://"+m.apiLn.Addr().String())
	}
	if cfg.Auth == "off" && m.runsAPI() {
		m.Logger.Warn("AUTH=off: every request is accepted without a key; use this only on a local machine")
	}
	return nil
}

// runBudget renews the model budget's lease until the returned stop, which
// gives the lease up and returns once it has.
func (m *Main) runBudget(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.budget.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// goCollector is the Go runtime's default metrics plus
// go_sched_latencies_seconds: how long goroutines were runnable before
// they ran. In `all` the API's handlers share the process's CPUs with the
// workers; when that histogram's tail grows, requests wait for a CPU, not
// for Postgres, and more cores or a separate `api` process is the cure.
func goCollector() prometheus.Collector {
	return collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)}))
}

// holderName names this process's lease: host, pid and a random suffix
// (a pid is reused across restarts and containers).
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}

// APIURL is the base URL the API serves on.
func (m *Main) APIURL() string { return "http://" + m.apiLn.Addr().String() }

// WorkerURL is the base URL of the worker's health and metrics server.
func (m *Main) WorkerURL() string { return "http://" + m.workerLn.Addr().String() }

// startWorkers starts River's working client on the workers' pool, with
// the workers and the periodic jobs.
func (m *Main) startWorkers(ctx context.Context, working jobs.ClientConfig) (err error) {
	m.process = holderName()
	working.ID = m.process
	working.PeriodicJobs = append(jobs.PeriodicJobs(), jobs.ListSweepPeriodicJob(m.Config.Queue.ListSweepInterval),
		jobs.ChangeFanoutPeriodicJob())
	if working.Workers, err = m.buildWorkers(ctx); err != nil {
		return err
	}
	if m.WorkerRiver, err = jobs.NewClient(m.WorkerDB.Pool, working); err != nil {
		return fmt.Errorf("error creating River client: %w", err)
	}
	// River's context is not the signal context: Close stops River with a
	// soft stop, so a signal never cancels running jobs at once.
	riverCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.riverCancel = cancel
	if m.budget != nil {
		m.budgetStop = m.runBudget(riverCtx)
	}
	if err := m.WorkerRiver.Start(riverCtx); err != nil {
		return fmt.Errorf("error starting River: %w", err)
	}
	m.leaseStop = m.runProcessLease(riverCtx)
	return nil
}

// runProcessLease renews this process's lease, and hands back the work of
// dead ones, until the returned func is called: with clean true (River
// stopped and put its jobs back) the lease is given up; otherwise it runs
// out and another process hands the jobs back.
func (m *Main) runProcessLease(ctx context.Context) (stop func(clean bool)) {
	cfg := m.WorkerDB.Pool.Config().ConnConfig.Copy()
	lease := &jobs.ProcessLease{
		ID: m.process, Settings: m.Config.Queue, Logger: m.Logger, Metrics: m.jobMetrics,
		Connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg) },
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var clean atomic.Bool
	go func() {
		defer close(done)
		lease.Run(ctx, clean.Load)
	}()
	return func(c bool) { clean.Store(c); cancel(); <-done }
}

func (m *Main) buildWorkers(ctx context.Context) (*river.Workers, error) {
	cfg := m.Config
	var (
		completer classifier.Completer
		batcher   jobs.Batcher
	)
	if cfg.OpenAIAPIKey != "" {
		// The process's bounds are caps; the deployment's budget (one
		// provider account, every worker process) bounds them further.
		id, name := llm.AccountOf(cfg.OpenAIBaseURL, cfg.OpenAIAPIKey)
		m.budget = llm.NewBudget(llm.BudgetConfig{
			RequestsPerMinute: cfg.LLMAccountRPM, TokensPerMinute: cfg.LLMAccountTPM, Concurrency: cfg.LLMAccountConcurrency,
			Holder: m.process, Logger: m.Logger, Observer: jobs.NewBudgetMetrics(m.Metrics),
		}, jobs.AccountStore{DB: m.WorkerDB.Pool, ID: id, Name: name})
		c, err := cfg.newLLMClient(m.jobMetrics, m.budget)
		if err != nil {
			return nil, err
		}
		limited := llm.Limit(c, cfg.LLMMaxConcurrency, cfg.LLMRatePerMinute, m.jobMetrics)
		m.budget.Govern(limited)
		m.logModelLimits(ctx, id, name)
		completer, m.limited = limited, limited
		batcher = c // a batch's requests are the provider's to pace, not our model slots
	} else {
		m.Logger.Warn("OPENAI_API_KEY is not set: overridden and cached domains are answered, others fail with \"no LLM configured\"")
	}
	searcher, err := cfg.newSearcher(cfg.SearchProvider)
	if err != nil {
		return nil, err
	}
	pipeline := classifier.NewPipeline(classifier.PipelineConfig{
		Store: jobs.NewPipelineStore(m.WorkerDB.Pool), LLM: completer, Search: searcher, Model: cfg.OpenAIModel,
		Freshness: cfg.Freshness, ClaimTTL: cfg.Queue.ClaimTTL(), ClaimWait: cfg.ClaimWait, Logger: m.Logger,
		EvidenceMaxChars: cfg.EvidenceMaxChars, OnEvidenceDropped: m.jobMetrics.EvidenceDropped,
	})
	workers := river.NewWorkers()
	price := modelPrices()
	spend := &jobs.Spenders{DB: m.WorkerDB.Pool, Price: price, Logger: m.Logger}
	if err := river.AddWorkerSafely(workers, &jobs.ClassifyWorker{
		DB: m.WorkerDB.Pool, Pipeline: pipeline, Registry: m.Registry, Settings: cfg.Queue, Logger: m.Logger,
		Metrics: m.jobMetrics, Price: price, Spend: spend,
	}); err != nil {
		return nil, err
	}
	// List work on its own pool (db/pools), with the same model slots.
	listPipeline := pipeline.WithStore(jobs.NewPipelineStore(m.ListDB.Pool))
	listSpend := &jobs.Spenders{DB: m.ListDB.Pool, Price: price, Logger: m.Logger}
	if err := river.AddWorkerSafely(workers, &jobs.ClassifyListWorker{
		DB: m.ListDB.Pool, Pipeline: listPipeline, Registry: m.Registry, Settings: cfg.Queue, Logger: m.Logger,
		Metrics: m.jobMetrics, Lists: m.listMetrics, Price: price, Spend: listSpend,
		Rows:  jobs.NewRowStore(m.ListDB.Pool, cfg.Queue.StoreRetryFor(), m.listMetrics, m.Logger),
		Gates: &jobs.ListGates{DB: m.ListDB.Pool, Logger: m.Logger},
	}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &jobs.BatchWorker{
		DB: m.ListDB.Pool, Batcher: batcher, Pipeline: listPipeline, Registry: m.Registry, Settings: cfg.Queue,
		Logger: m.Logger, Metrics: m.jobMetrics, Lists: m.listMetrics, Price: price,
	}); err != nil {
		return nil, err
	}
	// Without WEBHOOK_SECRET the API accepts no callbacks; deliveries queued
	// by an API that had one fail with an error saying so, and are retried.
	webhookKey, _ := jobs.ParseWebhookSecret(cfg.WebhookSecret) // validated with the config
	if err := river.AddWorkerSafely(workers, &jobs.WebhookWorker{
		DB: m.WorkerDB.Pool, Client: jobs.WebhookClient(cfg.CallbackAllowPrivate, cfg.Queue.WebhookTimeout),
		Key: webhookKey, UserAgent: userAgent(), Settings: cfg.Queue, Logger: m.Logger,
		OnDelivery: m.jobMetrics.WebhookDelivery,
	}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &jobs.ListSweepWorker{DB: m.WorkerDB.Pool, Settings: cfg.Queue, Logger: m.Logger,
		Lists: m.listMetrics}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &jobs.ChangeFanoutWorker{DB: m.WorkerDB.Pool, Settings: cfg.Queue, Logger: m.Logger}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &jobs.PurgeWorker{DB: m.WorkerDB.Pool, Logger: m.Logger, JobRetention: cfg.Queue.JobRetention}); err != nil {
		return nil, err
	}
	return workers, nil
}

// logModelLimits says once, at a worker's start, what bounds its model
// calls and where each bound came from (issue 36: nothing said that
// LLM_RATE_PER_MINUTE's default held 32 slots to 5 calls a second): the
// process's own caps (the default, or the variable that set them), the
// account's limits that every worker process leases a share of (0: none),
// and the limits the provider's x-ratelimit headers last stated, which
// lower the account's (0: none stated yet).
func (m *Main) logModelLimits(ctx context.Context, account, host string) {
	cfg := m.Config
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	statedRPM, statedTPM, err := db.LLMAccountStatedGet(ctx, m.WorkerDB.Pool, account)
	stated := "provider headers"
	if err != nil {
		stated = "provider headers (unread: " + err.Error() + ")"
	}
	m.Logger.Info("model limits", "concurrency", cfg.LLMMaxConcurrency, "concurrency_from", cfg.LLMConcurrencyFrom,
		"rate_per_minute", cfg.LLMRatePerMinute, "rate_from", cfg.LLMRateFrom,
		"account", host, "account_rpm", cfg.LLMAccountRPM, "account_tpm", cfg.LLMAccountTPM,
		"account_concurrency", cfg.LLMAccountConcurrency, "account_from", "LLM_ACCOUNT_*, leased among the worker processes",
		"stated_rpm", statedRPM, "stated_tpm", statedTPM, "stated_from", stated)
}

func (m *Main) apiHandler(ctx context.Context, traced bool) (http.Handler, error) {
	cfg := m.Config
	var auth httpapi.Authenticator = httpapi.NewAPIKeyAuth(m.DB.Pool, cfg.AuthCacheTTL, cfg.Callers, m.Logger)
	if cfg.Auth == "off" {
		auth = httpapi.AuthOff{Limits: cfg.Callers}
	}
	api := httpapi.Config{
		DB: m.DB, DBTimeout: cfg.APIDBTimeout, River: m.River, Registry: m.Registry, Auth: auth, Logger: m.Logger,
		Metrics:        httpapi.NewMetrics(m.Metrics),
		MetricsHandler: m.metricsHandler(),
		Webhooks:       cfg.WebhookSecret != "", CallbackAllowPrivate: cfg.CallbackAllowPrivate,
		Lists: cfg.Lists, Queue: cfg.Queue, Estimate: m.estimator(),
		ListCounts: httpapi.ListCounters{Rows: m.listMetrics.ListRows, Ended: m.listMetrics.ListEnded,
			Answered: m.jobMetrics.DomainsAnswered},
	}
	if traced {
		api.TracerProvider, api.TrustIncomingTrace = otel.GetTracerProvider(), cfg.TraceTrustIncoming
	}
	// River UI and the review page are for operators: behind basic auth,
	// or open only when the whole service runs with AUTH=off on a local
	// machine.
	if cfg.RiverUIUser != "" || cfg.Auth == "off" {
		ui, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(m.River, nil),
			Logger:    logging.Library(m.Logger, cfg.LogLevel),
			Prefix:    httpapi.RiverUIPrefix,
		})
		if err != nil {
			return nil, fmt.Errorf("error creating River UI: %w", err)
		}
		uiCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		m.uiCancel = cancel
		if err := ui.Start(uiCtx); err != nil {
			return nil, fmt.Errorf("error starting River UI: %w", err)
		}
		api.RiverUI, api.RiverUIUser, api.RiverUIPassword = ui, cfg.RiverUIUser, cfg.RiverUIPassword
		// The review page (issue 39) is for the same operators.
		api.Operators = true
	}
	return httpapi.New(api).Handler(), nil
}

// estimator is what the dry run's estimate is computed from: the model,
// its price (the same Pricer the workers charge the callers' spend with),
// the bounds of a worker process and the cache policy.
func (m *Main) estimator() httpapi.Estimator {
	cfg := m.Config
	e := httpapi.Estimator{Model: cfg.OpenAIModel, Price: modelPrices(), ModelConcurrency: cfg.LLMMaxConcurrency,
		ModelRatePerMinute: cfg.LLMRatePerMinute, DefaultCallSeconds: httpapi.DefaultCallSeconds, Freshness: cfg.Freshness}
	if cfg.SearchProvider != search.ProviderNone {
		e.SearchSeconds = searchSeconds
	}
	return e
}

// modelPrices is the deployment's price of a model call, from the reviewed
// price table (evals/prices.yaml): the one Pricer of the dry run's
// estimate, the callers' spend budgets and the cost stored with each
// answer.
func modelPrices() llm.Pricer { return evals.DefaultPrices().Price }

// searchSeconds is a search's share of a fresh domain's time, which the
// measured model latency leaves out: a homepage fetch or a Brave query
// takes about half a second to a second.
const searchSeconds = 0.7

func (m *Main) metricsHandler() http.Handler {
	return promhttp.HandlerFor(m.Metrics, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn)})
}

// workerHandler serves the worker role's /healthz, /readyz and /metrics.
func (m *Main) workerHandler() http.Handler {
	mux := http.NewServeMux()
	writeStatus := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body + "\n"))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 1500*time.Millisecond)
		defer cancel()
		if err := m.DB.Ping(ctx); err != nil {
			w.Header().Set("Retry-After", "2")
			writeStatus(w, http.StatusServiceUnavailable, `{"status":"unavailable"}`)
			return
		}
		writeStatus(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.Handle("GET /metrics", m.metricsHandler())
	return mux
}

func (m *Main) serve(addr string, h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("error listening on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("HTTP server stopped", "error", err)
		}
	}()
	return srv, ln, nil
}

// Close stops the process gracefully: the HTTP servers stop accepting and
// finish their requests, River stops fetching and lets running jobs finish
// within SOFT_STOP_TIMEOUT (then cancels them; they are retried), and the
// pool closes. ctx bounds the whole.
func (m *Main) Close(ctx context.Context) error {
	var errs []error
	for _, srv := range []*http.Server{m.apiServer, m.workerServer} {
		if srv != nil {
			if err := srv.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if m.limited != nil {
		// Calls waiting for the model give their domains back (the jobs
		// snooze); those in flight finish within the soft stop.
		m.limited.Stop()
	}
	if m.WorkerRiver != nil && m.riverCancel != nil {
		start := time.Now()
		err := m.WorkerRiver.Stop(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("error stopping River: %w", err))
		}
		if m.leaseStop != nil {
			m.leaseStop(err == nil)
		}
		m.riverCancel()
		m.Logger.Info("River stopped", "duration", time.Since(start).String())
	}
	if m.budgetStop != nil {
		m.budgetStop() // after River: its last calls ran within the lease
	}
	if m.uiCancel != nil {
		m.uiCancel()
	}
	if m.outage != nil {
		m.outage.Close() // before the pools: no probe of a closed pool
	}
	if m.ListDB != nil {
		m.ListDB.Close()
	}
	if m.WorkerDB != nil && m.WorkerDB != m.DB {
		m.WorkerDB.Close()
	}
	if m.DB != nil {
		m.DB.Close()
	}
	if m.stopTracing != nil {
		if err := m.stopTracing(ctx); err != nil {
			errs = append(errs, fmt.Errorf("error flushing traces: %w", err))
		}
	}
	return errors.Join(errs...)
}

// wait runs until ctx is done, then closes with a grace period a little
// longer than the soft-stop timeout.
func (m *Main) wait(ctx context.Context) error {
	<-ctx.Done()
	m.Logger.Info("shutting down")
	closeCtx, cancel := context.WithTimeout(context.Background(), m.Config.Queue.SoftStopTimeout+10*time.Second)
	defer cancel()
	return m.Close(closeCtx)
}
