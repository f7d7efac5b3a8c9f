package jobs

import (
	"time"

	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// Client is the River client of this application.
type Client = river.Client[pgx.Tx]

// ClientConfig configures a River client.
type ClientConfig struct {
	Settings Settings
	Logger   *slog.Logger
	// Schema holds River's tables; "" uses search_path.
	Schema string
	// Workers, when nil, makes an insert-only client (the api role): it
	// runs no jobs, holds no leadership and never starts.
	Workers *river.Workers
	// TestOnly skips River's start-up jitter, for test suites.
	TestOnly bool
	// PeriodicJobs are enqueued by the elected leader (workers only).
	PeriodicJobs []*river.PeriodicJob
	// Middleware wraps every insert and every job's work (tracing).
	Middleware []rivertype.Middleware
	// ID names the client in river_job.attempted_by: the worker process's
	// lease (ProcessLease) says whether it is alive. "" lets River choose.
	ID string
}

// webhookFetchPollInterval: River wakes a queue on insert notifications,
// but sends at most one per queue per 100 ms; a delivery queued right after
// another then waited for River's 1 s poll (measured: p50 ≈ 90 ms, max
// ≈ 0.8 s). Polling the webhook queue every 200 ms bounds that wait, for
// one small query per 200 ms per worker process.
const webhookFetchPollInterval = 200 * time.Millisecond

// NewClient returns a River client on pool with the reviewed settings.
func NewClient(pool *pgxpool.Pool, cfg ClientConfig) (*Client, error) {
	s := cfg.Settings
	rc := &river.Config{
		Logger:                      cfg.Logger,
		Schema:                      cfg.Schema,
		MaxAttempts:                 s.MaxAttempts,
		JobTimeout:                  s.JobTimeout,
		RescueStuckJobsAfter:        s.RescueStuckAfter,
		SoftStopTimeout:             s.SoftStopTimeout,
		CompletedJobRetentionPeriod: s.CompletedRetention,
		CancelledJobRetentionPeriod: s.CancelledRetention,
		DiscardedJobRetentionPeriod: s.DiscardedRetention,
		TestOnly:                    cfg.TestOnly,
		Middleware:                  cfg.Middleware,
		ID:                          cfg.ID,
	}
	if cfg.Workers != nil {
		rc.Workers = cfg.Workers
		rc.PeriodicJobs = cfg.PeriodicJobs
		rc.Queues = map[string]river.QueueConfig{
			QueueClassify: {MaxWorkers: s.ClassifyWorkers},
			QueueList:     {MaxWorkers: s.ListWorkers},
			QueueWebhook:  {MaxWorkers: s.WebhookWorkers, FetchPollInterval: webhookFetchPollInterval},
			// Housekeeping: the hourly purge, and the list sweep (every
			// minute), which must not wait behind a long purge.
			queueMaintenance: {MaxWorkers: 2},
		}
	}
	return river.NewClient(riverpgxv5.New(pool), rc)
}
