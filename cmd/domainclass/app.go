package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"riverqueue.com/riverui"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/pools"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/logging"
	"github.com/domainclass/domainclass/internal/tracing"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/spend"
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
	// capacity is the worker's lease of the deployment's model capacity,
	// renewed until capacityStop.
	capacity     *llm.Capacity
	capacityStop func()
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
	cfg.warnEnv(m.Logger)
	if m.runsAPI() {
		if err := cfg.checkSpoolDir(); err != nil {
			return err
		}
	}
	exported := tracing.Exported(cfg.TracesExporter, cfg.OTLPEndpoint, cfg.OTLPTracesEndpoint)
	if exported {
		if m.stopTracing, err = tracing.Start(ctx, Version, m.Role); err != nil {
			return err
		}
	}
	traced := m.Traced || exported
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

	m.registerMetrics()

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
			if m.workerServer, m.workerLn, err = m.serve(cfg.WorkerAddr, httpapi.WorkerHealth(m.DB, m.readyDetail, m.metricsHandler())); err != nil {
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

// registerMetrics makes the process's Prometheus registry: the runtime's,
// the queues', the callers' spend, the pools', the review's (api), and the
// workers' and lists' counters, which every role registers.
func (m *Main) registerMetrics() {
	cfg := m.Config
	m.Metrics = prometheus.NewRegistry()
	m.Metrics.MustRegister(goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.QueueCollector = jobs.NewQueueCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger,
		jobs.QueueClassify, jobs.QueueList, jobs.QueueWebhook)
	m.Metrics.MustRegister(m.QueueCollector)
	m.Metrics.MustRegister(spend.NewCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger))
	m.Metrics.MustRegister(pools.NewCollector(m.poolsByName()))
	if m.runsAPI() { // the review queues and agreement, once per deployment's api
		m.Metrics.MustRegister(httpapi.NewReviewCollector(m.DB.Pool, cfg.Queue.QueueMetricsInterval, m.Logger, m.Registry.Names()))
	}
	m.listMetrics = jobs.NewListMetrics(m.Metrics)
	// Registered by every role: the API counts the domains an upload
	// answers from overrides and the cache, as a worker counts its own.
	m.jobMetrics = jobs.NewMetrics(m.Metrics)
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

// APIURL is the base URL the API serves on.
func (m *Main) APIURL() string { return "http://" + m.apiLn.Addr().String() }

// WorkerURL is the base URL of the worker's health and metrics server.
func (m *Main) WorkerURL() string { return "http://" + m.workerLn.Addr().String() }

func (m *Main) apiHandler(ctx context.Context, traced bool) (http.Handler, error) {
	cfg := m.Config
	var auth httpapi.Authenticator = httpapi.NewAPIKeyAuth(m.DB.Pool, httpapi.DefaultAuthCacheTTL, m.Logger)
	if cfg.Auth == "off" {
		auth = httpapi.AuthOff{}
	}
	api := httpapi.Config{
		DB: m.DB, DBTimeout: cfg.APIDBTimeout, River: m.River, Registry: m.Registry, Auth: auth, Logger: m.Logger,
		Metrics:        httpapi.NewMetrics(m.Metrics),
		MetricsHandler: m.metricsHandler(),
		Webhooks:       cfg.WebhookSecret != "", CallbackAllowPrivate: cfg.CallbackAllowPrivate,
		Callers: cfg.Callers, Lists: cfg.Lists, Queue: cfg.Queue, Estimate: m.estimator(), ReadyDetail: m.readyDetail,
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
// the bounds of a worker process (its caps, else the account's, else the
// calls in flight of a process while no limit is known) and the cache
// policy.
func (m *Main) estimator() httpapi.Estimator {
	cfg := m.Config
	e := httpapi.Estimator{Model: cfg.OpenAIModel, Price: modelPrices(), DefaultCallSeconds: httpapi.DefaultCallSeconds,
		Freshness: cfg.Freshness}
	e.ModelConcurrency, e.ModelRatePerMinute = cfg.modelLimits().ProcessBounds()
	if cfg.SearchProvider != search.ProviderNone {
		e.SearchSeconds = httpapi.DefaultSearchSeconds
	}
	return e
}

// modelPrices is the deployment's price of a model call, from the reviewed
// price table (classifier/llm/prices.yaml): the one Pricer of the dry run's
// estimate, the callers' spend budgets and the cost stored with each
// answer.
func modelPrices() llm.Pricer { return llm.DefaultPrices().Price }

func (m *Main) metricsHandler() http.Handler {
	return promhttp.HandlerFor(m.Metrics, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn)})
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
	if m.capacityStop != nil {
		m.capacityStop() // after River: its last calls ran within the lease
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
