// Package cli is the domainclass command line: the callers' commands
// (submit, lists), the operators' (override, apikey, jobs, roles,
// migrate), eval, and the commands that start the service. Each command is
// an options type: cobra parses the command line into it, then calls its
// Validate (a mistake there is a usage error: exit code 2) and, only when
// that passes, its Run.
//
// What a command needs of the service (its configuration, pools, logger,
// model and search providers, the processes it starts) is wired by the
// binary's main (cmd/domainclass) and reached through Deployment, so that
// this package reads no setting of its own.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of every command. exitRowsFailed is the waiting commands'
// (submit --wait, lists wait, lists retry --wait): the work ended and its
// results were written, but some rows FAILED, as curl --fail tells an
// answer from an error; REJECTED rows (refused at upload, and reported
// then) do not count.
const (
	exitOK         = 0
	exitFailure    = 1
	exitUsage      = 2
	exitRowsFailed = 3
)

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// rowsFailedError is work that ended with rows FAILED (a job or list given
// up included), its results written: exit code 3.
type rowsFailedError struct{ msg string }

func (e *rowsFailedError) Error() string { return e.msg }

// Streams are a command line's environment and standard streams, and the
// binary's version.
type Streams struct {
	Environ []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Version is the binary's (main.Version, set at build time); "" or
	// "dev" when it was not set, and `version` reads the build's own.
	Version string
}

// base is what every command has from Run: the environment, the streams
// and the wiring of the service.
type base struct {
	environ []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	wiring  Wiring
	version string
}

// Run runs one command line and returns its exit code: 0 on success, 2 on
// a usage error, 1 on a failure, with one clear line on stderr; 3 when
// waited-for work ended with rows FAILED.
func Run(ctx context.Context, args []string, s Streams, wiring Wiring) int {
	stdout := s.Stdout
	if isTerminal(stdout) {
		stdout = &terminalWriter{w: stdout}
	}
	root := newRootCommand(&base{environ: s.Environ, stdin: s.Stdin, stdout: stdout, stderr: s.Stderr, wiring: wiring,
		version: s.Version})
	root.SetArgs(args)
	root.SetIn(s.Stdin)
	root.SetOut(stdout)
	root.SetErr(s.Stderr)
	err := root.ExecuteContext(ctx)
	var (
		uerr   *usageError
		failed *rowsFailedError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &failed):
		fmt.Fprintf(s.Stderr, "domainclass: %s\n", oneLine(err))
		return exitRowsFailed
	case errors.As(err, &uerr):
		fmt.Fprintf(s.Stderr, "domainclass: %s\n", uerr.msg)
		fmt.Fprintln(s.Stderr, `Run "domainclass --help" for usage.`)
		return exitUsage
	default:
		fmt.Fprintf(s.Stderr, "domainclass: %s%s\n", oneLine(err), hint(err))
		return exitFailure
	}
}

// newRootCommand returns the command tree. Flags may come before or after
// names (`apikey limits team-a --rate-per-minute 600`); every command has
// --help; `completion` prints shell completion.
func newRootCommand(c *base) *cobra.Command {
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
	root.Version = versionText(c.version) // --version
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		c.migrateCommand(),
		c.rolesCommand(),
		c.serveCommand(RoleAPI, "serve the HTTP API, River UI and /metrics (inserts jobs, runs none)"),
		c.serveCommand(RoleWorker, "run the River workers (health and metrics on WORKER_ADDR)"),
		c.serveCommand(RoleAll, "api and worker in one process (local use)"),
		group("override", "operators' verdicts on domains, which answer before the cache and the model",
			append(c.overrideCommands(), c.overrideImportCommand())...),
		group("known", `"known import" is "override import" under its first name`, c.overrideImportCommand()),
		group("review", "review queues: their rules, and the reviewed answers as eval cases", c.reviewCommands()...),
		group("jobs", "River jobs: list them, retry discarded ones (replay)", c.jobsListCommand(), c.jobsRetryCommand()),
		group("apikey", "callers' API keys (only hashes are stored)", c.apikeyCommands()...),
		c.submitCommand(),
		c.listsCommand(),
		c.evalCommand(),
		c.versionCommand(),
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

// oneLine folds an error into one line for the terminal.
func oneLine(err error) string {
	return printable(strings.Join(strings.Fields(err.Error()), " "))
}
