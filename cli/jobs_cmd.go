package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
func (c *base) riverClient(ctx context.Context) (*db.DB, *jobs.Client, error) {
	dep, err := c.deployment()
	if err != nil {
		return nil, nil, err
	}
	d, err := dep.OpenDB(ctx, "jobs", 2)
	if err != nil {
		return nil, nil, err
	}
	if err := d.Ping(ctx); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	client, err := dep.JobsClient(d)
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

// jobsList is `jobs list`.
type jobsList struct {
	*base
	invocation
	state, kind string
	limit       int
}

func (c *base) jobsListCommand() *cobra.Command {
	o := &jobsList{base: c}
	cmd := &cobra.Command{
		Use:   "list [--state STATE] [--kind KIND] [--limit N]",
		Short: "list River jobs, newest first",
	}
	cmd.Flags().StringVar(&o.state, "state", "", "only jobs in this state ("+strings.Join(stateNames(), ", ")+")")
	cmd.Flags().StringVar(&o.kind, "kind", "", "only jobs of this kind (classify, webhook)")
	cmd.Flags().IntVar(&o.limit, "limit", 50, "at most this many jobs, newest first")
	return command(cmd, o)
}

func (o *jobsList) Validate() error {
	if err := o.noArgs(); err != nil {
		return err
	}
	if o.state != "" && !slices.Contains(stateNames(), o.state) {
		return usagef("unknown state %q (want one of %s)", o.state, strings.Join(stateNames(), ", "))
	}
	if o.limit < 1 || o.limit > 10_000 {
		return usagef("--limit must be between 1 and 10000")
	}
	return nil
}

func (o *jobsList) Run(ctx context.Context) error {
	d, client, err := o.riverClient(ctx)
	if err != nil {
		return err
	}
	defer d.Close()

	params := river.NewJobListParams().OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(o.limit)
	if o.state != "" {
		params = params.States(rivertype.JobState(o.state))
	}
	if o.kind != "" {
		params = params.Kinds(o.kind)
	}
	res, err := client.JobList(ctx, params)
	if err != nil {
		return fmt.Errorf("error listing jobs: %w", err)
	}
	if len(res.Jobs) == 0 {
		fmt.Fprintln(o.stdout, "no jobs")
		return nil
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tATTEMPT\tQUEUE\tAPP JOB\tCREATED\tLAST ERROR")
	for _, j := range res.Jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.State, j.Attempt, j.MaxAttempts, j.Queue,
			appJobID(j), j.CreatedAt.UTC().Format("2006-01-02 15:04:05"), lastError(j))
	}
	return tw.Flush()
}

// jobsRetry is `jobs retry`.
type jobsRetry struct {
	*base
	invocation
	all  bool
	kind string
}

func (c *base) jobsRetryCommand() *cobra.Command {
	o := &jobsRetry{base: c}
	cmd := &cobra.Command{
		Use:   "retry ID... | --all-discarded [--kind KIND]",
		Short: "retry River jobs (by River or app job id), or every discarded one",
	}
	cmd.Flags().BoolVar(&o.all, "all-discarded", false, "retry every discarded job")
	cmd.Flags().StringVar(&o.kind, "kind", "", "with --all-discarded: only jobs of this kind")
	return command(cmd, o)
}

func (o *jobsRetry) Validate() error {
	if o.all == (len(o.args) > 0) {
		return usagef("give job ids, or --all-discarded (not both)")
	}
	return nil
}

func (o *jobsRetry) Run(ctx context.Context) error {
	d, client, err := o.riverClient(ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	ids, err := o.ids(ctx, d, client)
	if err != nil || len(ids) == 0 {
		return err
	}
	failed := 0
	for _, id := range ids {
		j, err := client.JobRetry(ctx, id)
		switch {
		case errors.Is(err, rivertype.ErrNotFound):
			failed++
			fmt.Fprintf(o.stderr, "job %d: not found\n", id)
		case errors.Is(db.Translate(err), db.ErrConflict):
			failed++
			fmt.Fprintf(o.stderr, "job %d: an equivalent job is already queued; nothing to retry\n", id)
		case err != nil:
			failed++
			fmt.Fprintf(o.stderr, "job %d: %s\n", id, oneLine(err))
		default:
			fmt.Fprintf(o.stdout, "retried job %d (%s %s): now %s, attempt %d of %d\n", j.ID, j.Kind, appJobID(j), j.State, j.Attempt, j.MaxAttempts)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs could not be retried", failed, len(ids))
	}
	return nil
}

// ids are the River job ids to retry: the arguments', or every discarded
// job's (none says so).
func (o *jobsRetry) ids(ctx context.Context, d *db.DB, client *jobs.Client) ([]int64, error) {
	if o.all {
		ids, err := discardedJobs(ctx, client, o.kind)
		if err == nil && len(ids) == 0 {
			fmt.Fprintln(o.stdout, "no discarded jobs")
		}
		return ids, err
	}
	var ids []int64
	for _, arg := range o.args {
		id, err := resolveJobID(ctx, d, arg)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
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
