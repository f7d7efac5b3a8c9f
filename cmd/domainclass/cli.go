package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/db"
)

// Exit codes of every command.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// cli is what every command gets from Run: the environment and the streams.
type cli struct {
	environ []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// Run runs one command line and returns its exit code: 0 on success, 2 on
// a usage error, 1 on a failure, with one clear line on stderr.
func Run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if isTerminal(stdout) {
		stdout = &terminalWriter{w: stdout}
	}
	root := newRootCommand(&cli{environ: environ, stdin: stdin, stdout: stdout, stderr: stderr})
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var uerr *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "domainclass: %s\n", uerr.msg)
		fmt.Fprintln(stderr, `Run "domainclass --help" for usage.`)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "domainclass: %s\n", oneLine(err))
		return exitFailure
	}
}

// newRootCommand returns the command tree. Flags may come before or after
// names (`apikey limits team-a --rate-per-minute 600`); every command has
// --help; `completion` prints shell completion.
func newRootCommand(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "domainclass <command>",
		Short: "domainclass classifies companies by their web domains.",
		Long: "domainclass classifies companies by their web domains.\n\n" +
			"Configuration is read from the environment; see docs/operating.md.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				_ = cmd.Usage()
				return usagef("no command given")
			}
			return usagef("unknown command %q", args[0])
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	root.AddCommand(
		c.migrateCommand(),
		c.rolesCommand(),
		c.serveCommand(RoleAPI, "serve the HTTP API, River UI and /metrics (inserts jobs, runs none)"),
		c.serveCommand(RoleWorker, "run the River workers (health and metrics on WORKER_ADDR)"),
		c.serveCommand(RoleAll, "api and worker in one process (local use)"),
		group("override", "operators' verdicts on domains, which answer before the cache and the model",
			append(c.overrideCommands(), c.overrideImportCommand())...),
		group("known", `"known import" is "override import" under its first name`, c.overrideImportCommand()),
		group("jobs", "River jobs: list them, retry discarded ones (replay)", c.jobsListCommand(), c.jobsRetryCommand()),
		group("apikey", "callers' API keys (only hashes are stored)", c.apikeyCommands()...),
		c.submitCommand(),
		c.listsCommand(),
		c.evalCommand(),
	)
	return root
}

// group is a command that only holds subcommands.
func group(name, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   name + " <command>",
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				names = append(names, s.Name())
			}
			if len(args) == 0 {
				return usagef("%q needs a subcommand: %s", name, strings.Join(names, ", "))
			}
			return usagef("unknown %s subcommand %q (want %s)", name, args[0], strings.Join(names, ", "))
		},
	}
	g.AddCommand(subs...)
	return g
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

// config reads the environment.
func (c *cli) config() (Config, error) { return LoadConfig(c.environ) }

func (c *cli) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "apply River's and the app's migrations (safe to repeat, and concurrently)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := c.config()
			if err != nil {
				return err
			}
			d, err := cfg.openDB(ctx, "migrate", 4)
			if err != nil {
				return err
			}
			defer d.Close()
			res, err := db.Migrate(ctx, d, libraryLogger(cfg.NewLogger(c.stderr), cfg.LogLevel))
			if err != nil {
				return fmt.Errorf("migration failed: %w", err)
			}
			if len(res.River)+len(res.App) == 0 {
				fmt.Fprintln(c.stdout, "migrate: the database is up to date")
				return nil
			}
			for _, v := range res.River {
				fmt.Fprintf(c.stdout, "migrate: applied River migration %s\n", v)
			}
			for _, v := range res.App {
				fmt.Fprintf(c.stdout, "migrate: applied app migration %s\n", v)
			}
			return nil
		},
	}
}

func (c *cli) rolesCommand() *cobra.Command {
	var r db.Roles
	cmd := &cobra.Command{
		Use:   "roles",
		Short: "create the api and worker roles with only what each uses (as the owner; again after each migrate)",
		Long: `Creates the Postgres login roles the api and worker processes can run as
(when they do not exist; without a password: set one with ALTER ROLE, or use
your own authentication) and grants each only what it uses in DATABASE_SCHEMA:
the api cannot change answers or delete River jobs, the worker cannot read
API keys. Run it as the owner of the tables, after migrate, and again after
every migrate that adds a table.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withDB(cmd, "roles", func(d *db.DB, cfg Config) error {
				if err := db.GrantRoles(cmd.Context(), d.Pool, cfg.DatabaseSchema, r); err != nil {
					return fmt.Errorf("error granting roles: %w", err)
				}
				fmt.Fprintf(c.stdout, "roles: %s (api) and %s (worker) hold what they use; set their passwords with ALTER ROLE\n", r.API, r.Worker)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&r.API, "api", "domainclass_api", "the api processes' role")
	cmd.Flags().StringVar(&r.Worker, "worker", "domainclass_worker", "the worker processes' role")
	return cmd
}

func (c *cli) serveCommand(role, short string) *cobra.Command {
	return &cobra.Command{
		Use:   role,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := c.config()
			if err != nil {
				return err
			}
			logger := cfg.NewLogger(c.stderr)
			slog.SetDefault(logger) // only for libraries that log on their own
			m := NewMain(cfg, role, logger)
			if err := m.Run(ctx); err != nil {
				return err
			}
			if m.apiLn != nil {
				fmt.Fprintf(c.stdout, "domainclass %s: API on %s\n", role, m.APIURL())
			}
			if m.workerLn != nil {
				fmt.Fprintf(c.stdout, "domainclass %s: health and metrics on %s\n", role, m.WorkerURL())
			}
			return m.wait(ctx)
		},
	}
}

// oneLine folds an error into one line for the terminal.
func oneLine(err error) string {
	return printable(strings.Join(strings.Fields(err.Error()), " "))
}
