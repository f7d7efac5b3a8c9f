package cli

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// The roles a process of the service runs as (`domainclass api`, ...):
// defined here once, for the commands that start them and for the Main
// of cmd/domainclass that runs them.
const (
	RoleAPI    = "api"
	RoleWorker = "worker"
	RoleAll    = "all"
)

// Wiring reads the service's configuration from the environment and
// returns what the commands that work on the service use. A command calls
// it only when it runs, so a caller's command (submit, lists) runs without
// the service's settings, and a bad one fails only the commands that need
// it.
type Wiring func(environ []string) (Deployment, error)

// Deployment is the service as the binary's configuration wires it
// (cmd/domainclass: its one table of environment variables, its pools,
// logger and providers).
type Deployment interface {
	// OpenDB opens a pool of at most maxConns connections for a command,
	// named "domainclass-"+purpose in pg_stat_activity.
	OpenDB(ctx context.Context, purpose string, maxConns int32) (*db.DB, error)
	// JobsClient is an insert-only River client on d, quiet below Warn.
	JobsClient(d *db.DB) (*jobs.Client, error)
	// Logger is the process logger (LOG_FORMAT, LOG_LEVEL) writing to w;
	// LibraryLogger the one handed to River and migrations.
	Logger(w io.Writer) *slog.Logger
	LibraryLogger(w io.Writer) *slog.Logger
	// Serve starts the service as role, says where it listens on stdout
	// and runs until ctx ends.
	Serve(ctx context.Context, role string, stdout, stderr io.Writer) error
	// Callers are the callers' default limits, which a key's 0 stands for.
	Callers() CallerDefaults
	// Models are the model and search settings eval starts from.
	Models() Models
}

// CallerDefaults are the limits of a key that sets none, and how long a
// revoked key may still be honoured.
type CallerDefaults struct {
	RatePerMinute, MaxQueuedDomains, MaxStoredRows int
	AuthCacheTTL                                   time.Duration
}

// Models is what eval needs of the service's model and search settings.
type Models struct {
	Model  string // OPENAI_MODEL
	Search string // SEARCH_PROVIDER
	// Configured is false without OPENAI_API_KEY.
	Configured                 bool
	Concurrency, RatePerMinute int // LLM_MAX_CONCURRENCY, LLM_RATE_PER_MINUTE
	// NewModel is the OPENAI_* model, without bounds.
	NewModel func() (classifier.Completer, error)
	// NewSearcher is the search provider called name.
	NewSearcher func(name string) (classifier.Searcher, error)
}

// deployment reads the configuration (Wiring) for a command that needs it.
func (c *base) deployment() (Deployment, error) { return c.wiring(c.environ) }

// withDB opens a small pool for a command and runs fn with it.
func (c *base) withDB(ctx context.Context, purpose string, fn func(*db.DB, Deployment) error) error {
	dep, err := c.deployment()
	if err != nil {
		return err
	}
	d, err := dep.OpenDB(ctx, purpose, 2)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d, dep)
}
