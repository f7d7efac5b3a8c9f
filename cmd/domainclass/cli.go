package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// Exit codes of every command.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `domainclass classifies companies by their web domains.

Usage:
  domainclass <command> [flags]

Commands:
  migrate                 apply River's and the app's migrations (safe to repeat)
  api                     serve the HTTP API (inserts jobs, runs none)
  worker                  run the River workers (health on WORKER_ADDR)
  all                     api and worker in one process (local use)
  known import FILE.csv   load known companies (header: domain,name)
  jobs list|retry         list River jobs; retry discarded ones (replay)
  apikey create|list|revoke|limits
                          callers' API keys (only hashes are stored)
  submit [--wait] DOMAIN...
                          a client: submit domains (any number), wait, print results
  eval --data FILE.csv    score models and prompt versions on labelled domains (see evals/README.md)

Configuration is read from the environment; see the README ("Configuration").
Run "domainclass <command> --help" for a command's flags.
`

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// Run runs one command and returns its exit code.
func Run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := run(ctx, args, environ, stdin, stdout, stderr)
	var uerr *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
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

func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"no command given"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "migrate":
		return runMigrate(ctx, rest, environ, stdout, stderr)
	case RoleAPI, RoleWorker, RoleAll:
		return runServe(ctx, cmd, rest, environ, stdout, stderr)
	case "jobs":
		return runJobs(ctx, rest, environ, stdout, stderr)
	case "apikey":
		return runAPIKey(ctx, rest, environ, stdout, stderr)
	case "submit":
		return runSubmit(ctx, rest, environ, stdin, stdout, stderr)
	case "eval":
		return runEval(ctx, rest, environ, stdout, stderr)
	case "known":
		if len(rest) == 0 || rest[0] != "import" {
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
				fmt.Fprintln(stdout, "Usage: domainclass known import [--classifier cpg] FILE.csv")
				return nil
			}
			return &usageError{`"known" needs a subcommand: known import FILE.csv`}
		}
		return runKnownImport(ctx, rest[1:], environ, stdin, stdout, stderr)
	}
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// newFlagSet returns a flag set whose errors are usage errors (one line,
// printed by Run) and whose --help prints the synopsis and flags on stdout.
func newFlagSet(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the flag package's own error lines would be a second line
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: domainclass %s\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return &usageError{err.Error()}
	}
	return err
}

func runMigrate(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "migrate", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	logger := cfg.NewLogger(stderr)
	d, err := cfg.openDB(ctx, "migrate", 4)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := db.Migrate(ctx, d, libraryLogger(logger, cfg.LogLevel))
	if err != nil {
		return fmt.Errorf("migration failed: %w", err)
	}
	if len(res.River)+len(res.App) == 0 {
		fmt.Fprintln(stdout, "migrate: the database is up to date")
		return nil
	}
	for _, v := range res.River {
		fmt.Fprintf(stdout, "migrate: applied River migration %s\n", v)
	}
	for _, v := range res.App {
		fmt.Fprintf(stdout, "migrate: applied app migration %s\n", v)
	}
	return nil
}

func runServe(ctx context.Context, role string, args, environ []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(role, role, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	logger := cfg.NewLogger(stderr)
	slog.SetDefault(logger) // only for libraries that log on their own
	m := NewMain(cfg, role, logger)
	if err := m.Run(ctx); err != nil {
		return err
	}
	if m.apiLn != nil {
		fmt.Fprintf(stdout, "domainclass %s: API on %s\n", role, m.APIURL())
	}
	if m.workerLn != nil {
		fmt.Fprintf(stdout, "domainclass %s: health and metrics on %s\n", role, m.WorkerURL())
	}
	return m.wait(ctx, stderr)
}

func runKnownImport(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("known import", "known import [--classifier cpg] FILE.csv", stdout)
	classifierName := fs.String("classifier", classifier.DefaultClassifier, "the classifier these companies are a yes for")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"known import needs exactly one FILE.csv (or - for stdin)"}
	}
	if _, err := classifier.DefaultRegistry().Get(*classifierName); err != nil {
		return &usageError{classifier.ErrorMessage(err)}
	}
	var r io.Reader = stdin
	if path := fs.Arg(0); path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("cannot open %s: %w", path, errors.Unwrap(err))
		}
		defer f.Close()
		r = f
	}
	rows, dups, err := readKnownCSV(r)
	if err != nil {
		return err
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	d, err := cfg.openDB(ctx, "known", 2)
	if err != nil {
		return err
	}
	defer d.Close()
	inserted, updated, err := d.KnownImport(ctx, *classifierName, rows)
	if err != nil {
		return fmt.Errorf("import failed, nothing was written: %s", classifier.ErrorMessage(err))
	}
	fmt.Fprintf(stdout, "known import: %d %s for %s (%d new, %d updated", len(rows), plural(len(rows), "company", "companies"), *classifierName, inserted, updated)
	if dups > 0 {
		fmt.Fprintf(stdout, ", %d duplicate rows skipped", dups)
	}
	fmt.Fprintln(stdout, ")")
	return nil
}

// readKnownCSV reads a CSV with a header naming "domain" and "name" columns
// (in any order, other columns ignored). Every domain is normalized; the
// first bad row stops the import before anything is written.
func readKnownCSV(r io.Reader) (rows []db.KnownCompanyRow, dups int, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, 0, errors.New("the CSV file is empty; it needs a header line: domain,name")
	} else if err != nil {
		return nil, 0, fmt.Errorf("cannot read the CSV header: %w", err)
	}
	domainCol, nameCol := -1, -1
	for i, h := range header {
		switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) {
		case "domain":
			domainCol = i
		case "name":
			nameCol = i
		}
	}
	if domainCol < 0 || nameCol < 0 {
		return nil, 0, fmt.Errorf("the CSV header must name the columns domain and name, got %q", strings.Join(header, ","))
	}
	seen := map[string]bool{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("cannot read the CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) <= max(domainCol, nameCol) {
			return nil, 0, fmt.Errorf("line %d: expected a domain and a name", line)
		}
		domain, err := classifier.NormalizeDomain(rec[domainCol])
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", line, err)
		}
		name := strings.TrimSpace(rec[nameCol])
		if name == "" {
			return nil, 0, fmt.Errorf("line %d: %s has no name", line, domain)
		}
		if seen[domain] {
			dups++
			continue
		}
		seen[domain] = true
		rows = append(rows, db.KnownCompanyRow{Domain: domain, Name: name})
	}
	if len(rows) == 0 {
		return nil, 0, errors.New("the CSV file has a header but no companies")
	}
	return rows, dups, nil
}

// oneLine folds an error into one line for the terminal.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
