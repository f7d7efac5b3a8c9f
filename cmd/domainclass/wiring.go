package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/logging"
	"github.com/domainclass/domainclass/jobs"
)

// Run runs one command line (package cli) with this binary's wiring and
// returns its exit code.
func Run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, args, cli.Streams{Environ: environ, Stdin: stdin, Stdout: stdout, Stderr: stderr, Version: Version}, wiring)
}

// wiring reads the configuration (config.go's table) for the commands that
// work on the service.
func wiring(environ []string) (cli.Deployment, error) {
	cfg, err := LoadConfig(environ)
	if err != nil {
		return nil, err
	}
	return configured{cfg}, nil
}

// configured is cli.Deployment from the configuration.
type configured struct{ cfg Config }

func (d configured) OpenDB(ctx context.Context, purpose string, maxConns int32) (*db.DB, error) {
	return d.cfg.openDB(ctx, purpose, maxConns)
}

func (d configured) JobsClient(pool *db.DB) (*jobs.Client, error) {
	return jobs.NewClient(pool.Pool, jobs.ClientConfig{Settings: d.cfg.Queue, Schema: d.cfg.DatabaseSchema,
		Logger: logging.Library(d.cfg.NewLogger(io.Discard), "info")})
}

func (d configured) Logger(w io.Writer) *slog.Logger { return d.cfg.NewLogger(w) }

func (d configured) LibraryLogger(w io.Writer) *slog.Logger {
	return logging.Library(d.cfg.NewLogger(w), d.cfg.LogLevel)
}

// Serve starts the process of role (app.go) and runs it until ctx ends.
func (d configured) Serve(ctx context.Context, role string, stdout, stderr io.Writer) error {
	logger := d.cfg.NewLogger(stderr)
	slog.SetDefault(logger) // only for libraries that log on their own
	m := NewMain(d.cfg, role, logger)
	if err := m.Run(ctx); err != nil {
		return err
	}
	if m.apiLn != nil {
		fmt.Fprintf(stdout, "domainclass %s: API on %s\n", role, m.APIURL())
	}
	if m.workerLn != nil {
		fmt.Fprintf(stdout, "domainclass %s: health and metrics on %s\n", role, m.WorkerURL())
	}
	return m.wait(ctx)
}

func (d configured) Callers() cli.CallerDefaults {
	return cli.CallerDefaults{RatePerMinute: d.cfg.Callers.RatePerMinute, MaxQueuedDomains: d.cfg.Callers.MaxQueuedDomains,
		MaxStoredRows: d.cfg.Callers.MaxStoredRows, AuthCacheTTL: httpapi.DefaultAuthCacheTTL}
}

func (d configured) Models() cli.Models {
	return cli.Models{
		Model: d.cfg.OpenAIModel, Search: d.cfg.SearchProvider, Configured: d.cfg.OpenAIAPIKey != "",
		Concurrency: d.cfg.modelLimits().InFlight(), RatePerMinute: d.cfg.LLMRatePerMinute,
		NewModel:    func() (classifier.Completer, error) { return d.cfg.newLLMClient(nil, nil) },
		NewSearcher: d.cfg.newSearcher,
	}
}
