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
	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// The operators' replay tool over River's JobList and JobRetry. IDs are
// River job ids (as in River UI) or app job ids (UUIDs).

// riverClient opens the database and an insert-only River client.
func (c *cli) riverClient(ctx context.Context) (*db.DB, *jobs.Client, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, nil, err
	}
	d, err := cfg.openDB(ctx, "jobs", 2)
	if err != nil {
		return nil, nil, err
	}
	if err := d.Ping(ctx); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	client, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: cfg.Queue, Schema: cfg.DatabaseSchema,
		Logger: libraryLogger(cfg.NewLogger(io.Discard), "info")})
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, client, nil
}

func stateNames() []string {
	var names []string
	for _, s := range rivertype.JobStates() {
		names = append(names, string(s))
	}
	return names
}

func (c *cli) jobsListCommand() *cobra.Command {
	var (
		state, kind string
		limit       int
	)
	cmd := &cobra.Command{
		Use:   "list [--state STATE] [--kind KIND] [--limit N]",
		Short: "list River jobs, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if state != "" && !slices.Contains(stateNames(), state) {
				return usagef("unknown state %q (want one of %s)", state, strings.Join(stateNames(), ", "))
			}
			if limit < 1 || limit > 10_000 {
				return usagef("--limit must be between 1 and 10000")
			}
			d, client, err := c.riverClient(ctx)
			if err != nil {
				return err
			}
			defer d.Close()

			params := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(limit)
			if state != "" {
				params = params.States(rivertype.JobState(state))
			}
			if kind != "" {
				params = params.Kinds(kind)
			}
			res, err := client.JobList(ctx, params)
			if err != nil {
				return fmt.Errorf("error listing jobs: %w", err)
			}
			if len(res.Jobs) == 0 {
				fmt.Fprintln(c.stdout, "no jobs")
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tSTATE\tATTEMPT\tQUEUE\tAPP JOB\tCREATED\tLAST ERROR")
			for _, j := range res.Jobs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.State, j.Attempt, j.MaxAttempts, j.Queue,
					appJobID(j), j.CreatedAt.UTC().Format("2006-01-02 15:04:05"), lastError(j))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state ("+strings.Join(stateNames(), ", ")+")")
	cmd.Flags().StringVar(&kind, "kind", "", "only jobs of this kind (classify, webhook)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs, newest first")
	return cmd
}

func (c *cli) jobsRetryCommand() *cobra.Command {
	var (
		all  bool
		kind string
	)
	cmd := &cobra.Command{
		Use:   "retry ID... | --all-discarded [--kind KIND]",
		Short: "retry River jobs (by River or app job id), or every discarded one",
		Args: func(_ *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return usagef("give job ids, or --all-discarded (not both)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			d, client, err := c.riverClient(ctx)
			if err != nil {
				return err
			}
			defer d.Close()
			var ids []int64
			if all {
				if ids, err = discardedJobs(ctx, client, kind); err != nil {
					return err
				}
				if len(ids) == 0 {
					fmt.Fprintln(c.stdout, "no discarded jobs")
					return nil
				}
			} else {
				for _, arg := range args {
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
					fmt.Fprintf(c.stderr, "job %d: not found\n", id)
				case errors.Is(db.Translate(err), db.ErrConflict):
					failed++
					fmt.Fprintf(c.stderr, "job %d: an equivalent job is already queued; nothing to retry\n", id)
				case err != nil:
					failed++
					fmt.Fprintf(c.stderr, "job %d: %s\n", id, oneLine(err))
				default:
					fmt.Fprintf(c.stdout, "retried job %d (%s %s): now %s, attempt %d of %d\n", j.ID, j.Kind, appJobID(j), j.State, j.Attempt, j.MaxAttempts)
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d jobs could not be retried", failed, len(ids))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all-discarded", false, "retry every discarded job")
	cmd.Flags().StringVar(&kind, "kind", "", "with --all-discarded: only jobs of this kind")
	return cmd
}

// discardedJobs lists every discarded job of kind ("" for any), oldest
// first.
func discardedJobs(ctx context.Context, client *jobs.Client, kind string) ([]int64, error) {
	const page = 1000
	params := river.NewJobListParams().States(rivertype.JobStateDiscarded).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(page)
	if kind != "" {
		params = params.Kinds(kind)
	}
	var ids []int64
	for {
		res, err := client.JobList(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("error listing discarded jobs: %w", err)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		if len(res.Jobs) < page {
			return ids, nil
		}
		params = params.After(res.LastCursor)
	}
}

// resolveJobID reads a River job id, or an app job id (UUID) that it looks
// up.
func resolveJobID(ctx context.Context, d *db.DB, arg string) (int64, error) {
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	appID, err := uuid.Parse(arg)
	if err != nil {
		return 0, usagef("%q is neither a River job id nor an app job id", arg)
	}
	job, err := db.JobGet(ctx, d.Pool, appID)
	if errors.Is(err, db.ErrNotFound) {
		return 0, fmt.Errorf("app job %s: not found", appID)
	} else if err != nil {
		return 0, fmt.Errorf("app job %s: %w", appID, err)
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
