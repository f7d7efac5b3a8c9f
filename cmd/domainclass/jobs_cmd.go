package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

const jobsUsage = `Usage:
  domainclass jobs list [--state STATE] [--kind KIND] [--limit N]
  domainclass jobs retry ID... | --all-discarded [--kind KIND]

IDs are River job ids (as in River UI) or app job ids (UUIDs).
States: available, scheduled, pending, running, retryable, completed, cancelled, discarded.
`

// runJobs is the operators' replay tool over River's JobList and JobRetry.
func runJobs(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{`"jobs" needs a subcommand: list or retry`}
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, jobsUsage)
		return nil
	case "list":
		return runJobsList(ctx, args[1:], environ, stdout)
	case "retry":
		return runJobsRetry(ctx, args[1:], environ, stdout, stderr)
	}
	return &usageError{fmt.Sprintf("unknown jobs subcommand %q (want list or retry)", args[0])}
}

// riverClient opens the database and an insert-only River client.
func riverClient(ctx context.Context, environ []string) (*db.DB, *jobs.Client, error) {
	cfg, err := LoadConfig(environ)
	if err != nil {
		return nil, nil, err
	}
	d, err := cfg.openDB(ctx, "jobs", 2)
	if err != nil {
		return nil, nil, err
	}
	if err := d.Ping(ctx); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("cannot reach the database: %s", classifier.ErrorMessage(err))
	}
	c, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: cfg.Settings, Schema: cfg.DatabaseSchema,
		Logger: libraryLogger(cfg.NewLogger(io.Discard), "info")})
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, c, nil
}

var riverStateNames = []string{"available", "scheduled", "pending", "running", "retryable", "completed", "cancelled", "discarded"}

func runJobsList(ctx context.Context, args, environ []string, stdout io.Writer) error {
	fs := newFlagSet("jobs list", "jobs list [--state STATE] [--kind KIND] [--limit N]", stdout)
	state := fs.String("state", "", "only jobs in this state ("+strings.Join(riverStateNames, ", ")+")")
	kind := fs.String("kind", "", "only jobs of this kind (classify, webhook)")
	limit := fs.Int("limit", 50, "at most this many jobs, newest first")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *state != "" && !slices.Contains(riverStateNames, *state) {
		return &usageError{fmt.Sprintf("unknown state %q (want one of %s)", *state, strings.Join(riverStateNames, ", "))}
	}
	if *limit < 1 || *limit > 10_000 {
		return &usageError{"--limit must be between 1 and 10000"}
	}
	d, client, err := riverClient(ctx, environ)
	if err != nil {
		return err
	}
	defer d.Close()

	params := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(*limit)
	if *state != "" {
		params = params.States(rivertype.JobState(*state))
	}
	if *kind != "" {
		params = params.Kinds(*kind)
	}
	res, err := client.JobList(ctx, params)
	if err != nil {
		return fmt.Errorf("error listing jobs: %s", classifier.ErrorMessage(err))
	}
	if len(res.Jobs) == 0 {
		fmt.Fprintln(stdout, "no jobs")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tATTEMPT\tQUEUE\tAPP JOB\tCREATED\tLAST ERROR")
	for _, j := range res.Jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.State, j.Attempt, j.MaxAttempts, j.Queue,
			appJobID(j), j.CreatedAt.UTC().Format("2006-01-02 15:04:05"), lastError(j))
	}
	return tw.Flush()
}

func runJobsRetry(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs retry", "jobs retry ID... | --all-discarded [--kind KIND]", stdout)
	all := fs.Bool("all-discarded", false, "retry every discarded job")
	kind := fs.String("kind", "", "with --all-discarded: only jobs of this kind")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *all == (fs.NArg() > 0) {
		return &usageError{"give job ids, or --all-discarded (not both)"}
	}
	d, client, err := riverClient(ctx, environ)
	if err != nil {
		return err
	}
	defer d.Close()

	var ids []int64
	if *all {
		params := river.NewJobListParams().States(rivertype.JobStateDiscarded).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1000)
		if *kind != "" {
			params = params.Kinds(*kind)
		}
		for {
			res, err := client.JobList(ctx, params)
			if err != nil {
				return fmt.Errorf("error listing discarded jobs: %s", classifier.ErrorMessage(err))
			}
			for _, j := range res.Jobs {
				ids = append(ids, j.ID)
			}
			if len(res.Jobs) < 1000 {
				break
			}
			params = params.After(res.LastCursor)
		}
		if len(ids) == 0 {
			fmt.Fprintln(stdout, "no discarded jobs")
			return nil
		}
	} else {
		for _, arg := range fs.Args() {
			id, err := resolveJobID(ctx, d, arg)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
	}

	failed := 0
	for _, id := range ids {
		j, err := client.JobRetry(ctx, id)
		switch {
		case errors.Is(err, rivertype.ErrNotFound):
			failed++
			fmt.Fprintf(stderr, "job %d: not found\n", id)
		case classifier.ErrorCode(err) == classifier.ECONFLICT || err != nil && strings.Contains(err.Error(), "23505"):
			failed++
			fmt.Fprintf(stderr, "job %d: an equivalent job is already queued; nothing to retry\n", id)
		case err != nil:
			failed++
			fmt.Fprintf(stderr, "job %d: %s\n", id, oneLine(err))
		default:
			fmt.Fprintf(stdout, "retried job %d (%s %s): now %s, attempt %d of %d\n", j.ID, j.Kind, appJobID(j), j.State, j.Attempt, j.MaxAttempts)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs could not be retried", failed, len(ids))
	}
	return nil
}

// resolveJobID reads a River job id, or an app job id (UUID) that it looks
// up.
func resolveJobID(ctx context.Context, d *db.DB, arg string) (int64, error) {
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	appID, err := uuid.Parse(arg)
	if err != nil {
		return 0, &usageError{fmt.Sprintf("%q is neither a River job id nor an app job id", arg)}
	}
	job, err := d.JobGet(ctx, appID, nil)
	if err != nil {
		return 0, fmt.Errorf("app job %s: %s", appID, classifier.ErrorMessage(err))
	}
	if job.RiverJobID == 0 {
		return 0, fmt.Errorf("app job %s has no River job", appID)
	}
	return job.RiverJobID, nil
}

func appJobID(j *rivertype.JobRow) string {
	var args struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(j.EncodedArgs, &args)
	if args.JobID == "" {
		return "-"
	}
	return args.JobID
}

func lastError(j *rivertype.JobRow) string {
	if len(j.Errors) == 0 {
		return ""
	}
	msg := strings.Join(strings.Fields(j.Errors[len(j.Errors)-1].Error), " ")
	if r := []rune(msg); len(r) > 120 {
		msg = string(r[:119]) + "…"
	}
	return msg
}
