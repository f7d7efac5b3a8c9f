package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/domainclass/domainclass/capacity"
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/spend"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// startWorkers starts River's working client on the workers' pool, with
// the workers and the periodic jobs.
func (m *Main) startWorkers(ctx context.Context, working jobs.ClientConfig) (err error) {
	m.process = holderName()
	working.ID = m.process
	working.PeriodicJobs = jobs.PeriodicJobs(m.Config.Queue)
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
	if m.capacity != nil {
		m.capacityStop = m.runCapacity(riverCtx)
	}
	if err := m.WorkerRiver.Start(riverCtx); err != nil {
		return fmt.Errorf("error starting River: %w", err)
	}
	m.leaseStop = m.runProcessLease(riverCtx)
	return nil
}

// runCapacity renews the model capacity's lease until the returned stop, which
// gives the lease up and returns once it has.
func (m *Main) runCapacity(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.capacity.Run(ctx)
	}()
	return func() { cancel(); <-done }
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

// holderName names this process's lease: host, pid and a random suffix
// (a pid is reused across restarts and containers).
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}

func (m *Main) buildWorkers(ctx context.Context) (*river.Workers, error) {
	cfg := m.Config
	completer, batcher, err := m.buildModel(ctx)
	if err != nil {
		return nil, err
	}
	searcher, err := cfg.newSearcher(cfg.SearchProvider)
	if err != nil {
		return nil, err
	}
	pipeline := classifier.NewPipeline(classifier.PipelineConfig{
		Store: jobs.NewPipelineStore(m.WorkerDB.Pool), LLM: completer, Search: searcher, Model: cfg.OpenAIModel,
		Freshness: cfg.Freshness, ClaimTTL: cfg.Queue.ClaimTTL(), ClaimWait: cfg.ClaimWait, Logger: m.Logger,
		OnEvidenceDropped: m.jobMetrics.EvidenceDropped,
	})
	workers := river.NewWorkers()
	price := modelPrices()
	jobSpend := &spend.Spenders{DB: m.WorkerDB.Pool, Price: price, Logger: m.Logger}
	if err := river.AddWorkerSafely(workers, &jobs.ClassifyWorker{
		DB: m.WorkerDB.Pool, Pipeline: pipeline, Registry: m.Registry, Settings: cfg.Queue, Logger: m.Logger,
		Metrics: m.jobMetrics, Price: price, Spend: jobSpend,
	}); err != nil {
		return nil, err
	}
	// List work on its own pool (db/pools), with the same model slots.
	listPipeline := pipeline.WithStore(jobs.NewPipelineStore(m.ListDB.Pool))
	listSpend := &spend.Spenders{DB: m.ListDB.Pool, Price: price, Logger: m.Logger}
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

// buildModel is the workers' model: the calls bounded by the process's
// caps and the deployment's capacity (m.limited, m.capacity), and the Batch
// API's client; nil, nil without OPENAI_API_KEY.
func (m *Main) buildModel(ctx context.Context) (classifier.Completer, jobs.Batcher, error) {
	cfg := m.Config
	if cfg.OpenAIAPIKey == "" {
		m.Logger.Warn("OPENAI_API_KEY is not set: overridden and cached domains are answered, others fail with \"no LLM configured\"")
		return nil, nil, nil
	}
	// The deployment's capacity (one provider account, every worker
	// process) decides; the process's own bounds, when set, are caps
	// (capacity/limits.go).
	id, name := llm.AccountOf(cfg.OpenAIBaseURL, cfg.OpenAIAPIKey)
	store := capacity.AccountStore{DB: m.WorkerDB.Pool, ID: id, Name: name}
	m.capacity = llm.NewCapacity(llm.CapacityConfig{
		RequestsPerMinute: cfg.LLMAccountRPM, TokensPerMinute: cfg.LLMAccountTPM, Concurrency: cfg.LLMAccountConcurrency,
		Holder: m.process, Logger: m.Logger, Observer: capacity.NewMetrics(m.Metrics),
	}, store)
	c, err := cfg.newLLMClient(m.jobMetrics, m.capacity)
	if err != nil {
		return nil, nil, err
	}
	limited := llm.Limit(c, cfg.LLMMaxConcurrency, cfg.LLMRatePerMinute, m.jobMetrics)
	m.capacity.Govern(limited)
	cfg.modelLimits().Log(ctx, m.Logger, store)
	m.limited = limited
	return limited, c, nil // a batch's requests are the provider's to pace, not our model slots
}
