package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// The commands that find a caller's lists, wait for one, and queue its
// failed rows again (issue 27: a list that ran for hours must be found,
// resumed and waited for again from any shell).

// waitOptions are how a list is waited for and its results written.
type waitOptions struct {
	out    string
	ndjson bool
	poll   time.Duration
}

// waitList waits for list id to end, showing its progress on one line of
// stderr (why the API is retried shows on it too, however long that
// lasts), then writes its results (into o.out, whole, or to stdout). It
// fails when the list did not complete (a rowsFailedError when it ended
// with rows FAILED), and says how to wait again when the wait is cut
// short.
func (c *base) waitList(ctx context.Context, api *client.Client, id string, o waitOptions) error {
	progress := newProgress(c.stderr, "rows")
	onRetry := api.OnRetry
	api.OnRetry = progress.retrying
	st, err := api.WaitList(ctx, id, o.poll, progress.list)
	api.OnRetry = onRetry
	progress.finish()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(c.stderr, "stopped waiting; the list goes on: %s\nwait for it again with: %s\n", id, resumeCommand(id, o))
			return errors.New("interrupted; the list was not cancelled")
		}
		fmt.Fprintf(c.stderr, "stopped waiting after an error; the list goes on: %s\nwait for it again with: %s\n", id, resumeCommand(id, o))
		return err
	}
	p := st.Progress
	fmt.Fprintf(c.stderr, "list %s %s: %d rows: %d completed, %d failed, %d rejected, %d cancelled\n",
		st.ListID, st.Status, p.Total, p.Completed, p.Failed, p.Rejected, p.Cancelled)
	if err := c.writeListResults(ctx, api, st.ListID, o.out, client.ResultsOptions{NDJSON: o.ndjson}); err != nil {
		return err
	}
	switch {
	case st.Status == classifier.StatusFailed:
		return &rowsFailedError{fmt.Sprintf("list %s failed: %s; queue its rows again with \"domainclass lists retry %s\"",
			st.ListID, st.Error, st.ListID)}
	case st.Status == classifier.StatusCancelled:
		return fmt.Errorf("list %s was cancelled", st.ListID)
	case p.Failed > 0:
		return &rowsFailedError{fmt.Sprintf("%d rows FAILED (the reason of each is in its error column); queue them again with \"domainclass lists retry %s\"",
			p.Failed, st.ListID)}
	}
	return nil
}

// resumeCommand is the command that waits for list id again as o did.
func resumeCommand(id string, o waitOptions) string {
	cmd := "domainclass lists wait " + id
	if o.out != "" {
		cmd += " --out " + shellWord(o.out)
	}
	if o.ndjson {
		cmd += " --ndjson"
	}
	return cmd
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func waitFlags(cmd *cobra.Command, o *waitOptions, what string) {
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", what+"write the results to FILE (whole, or not at all) instead of stdout")
	f.BoolVar(&o.ndjson, "ndjson", false, what+"write the results as NDJSON (one JSON object per row) instead of CSV")
	f.DurationVar(&o.poll, "poll", time.Second, what+"how often to ask for progress")
}

// listsWait is `lists wait`.
type listsWait struct {
	*base
	invocation
	api  apiOptions
	wait waitOptions
}

func (c *base) listsWaitCommand() *cobra.Command {
	o := &listsWait{base: c}
	cmd := &cobra.Command{
		Use:   "wait LIST_ID [--out FILE] [--ndjson]",
		Short: "wait for a list to end, showing progress, then write its results (as submit --wait does)",
		Long:  "wait waits for a list to end, showing progress, then writes its results (as submit --wait does).\n\n" + waitExitStatus,
	}
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	waitFlags(cmd, &o.wait, "")
	return command(cmd, o)
}

func (o *listsWait) Validate() error {
	if o.wait.poll < 100*time.Millisecond {
		return usagef("--poll must be at least 100ms")
	}
	return o.listID()
}

func (o *listsWait) Run(ctx context.Context) error {
	return o.waitList(ctx, o.apiClient(o.api.url, o.api.key), o.args[0], o.wait)
}

// listsRetry is `lists retry`.
type listsRetry struct {
	*base
	invocation
	api          apiOptions
	asJSON, wait bool
	waitOptions  waitOptions
}

func (c *base) listsRetryCommand() *cobra.Command {
	o := &listsRetry{base: c}
	cmd := &cobra.Command{
		Use:   "retry LIST_ID [--wait [--out FILE]]",
		Short: "queue a list's FAILED and never-answered rows again (once it has ended); safe to repeat",
		Long: "retry queues a list's FAILED and never-answered rows again (once it has ended); safe to repeat.\n\n" +
			waitExitStatus,
	}
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print the answer as JSON, as the API gives it")
	f.BoolVar(&o.wait, "wait", false, "then wait for the list to end and write its results")
	waitFlags(cmd, &o.waitOptions, "with --wait: ")
	return command(cmd, o)
}

func (o *listsRetry) Validate() error {
	w := o.waitOptions
	switch {
	case (w.out != "" || w.ndjson) && !o.wait:
		return usagef("--out and --ndjson write the results, so they need --wait")
	case o.asJSON && o.wait:
		return usagef("choose --json (the retry's answer) or --wait (the results), not both")
	case w.poll < 100*time.Millisecond:
		return usagef("--poll must be at least 100ms")
	}
	return o.listID()
}

func (o *listsRetry) Run(ctx context.Context) error {
	api := o.apiClient(o.api.url, o.api.key)
	r, err := api.RetryList(ctx, o.args[0])
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	switch {
	case r.Requeued > 0:
		fmt.Fprintf(o.stderr, "list %s: %d rows queued again\n", r.List.ListID, r.Requeued)
	case !r.List.Ended():
		fmt.Fprintf(o.stderr, "list %s is %s: nothing queued again (retry it once it has ended)\n", r.List.ListID, r.List.Status)
	default:
		fmt.Fprintf(o.stderr, "list %s has no FAILED row: nothing queued again\n", r.List.ListID)
	}
	if o.wait {
		return o.waitList(ctx, api, r.List.ListID, o.waitOptions)
	}
	return printListStatus(o.stdout, &r.List, api.BaseURL, false)
}

// listsLs is `lists ls`.
type listsLs struct {
	*base
	invocation
	api         apiOptions
	limit       int
	all, asJSON bool
}

func (c *base) listsLsCommand() *cobra.Command {
	o := &listsLs{base: c}
	cmd := &cobra.Command{
		Use:   "ls [--limit N] [--all] [--json]",
		Short: "list your lists, newest first: id, status, progress, when",
	}
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	f := cmd.Flags()
	f.IntVar(&o.limit, "limit", 20, "lists per page (1-100)")
	f.BoolVar(&o.all, "all", false, "every list, page after page")
	f.BoolVar(&o.asJSON, "json", false, "print the lists as JSON (the API's page, all pages with --all)")
	return command(cmd, o)
}

func (o *listsLs) Validate() error {
	if len(o.args) > 0 {
		return usagef("%s takes no arguments", o.path())
	}
	if o.limit < 1 || o.limit > 100 {
		return usagef("--limit must be from 1 to 100")
	}
	return nil
}

func (o *listsLs) Run(ctx context.Context) error {
	api := o.apiClient(o.api.url, o.api.key)
	var lists []wire.ListStatus
	cursor := ""
	for {
		page, err := api.Lists(ctx, o.limit, cursor)
		if err != nil {
			return err
		}
		lists = append(lists, page.Lists...)
		cursor = page.NextCursor
		if cursor == "" || !o.all {
			break
		}
	}
	if o.asJSON {
		return json.NewEncoder(o.stdout).Encode(wire.ListIndex{Lists: lists, NextCursor: cursor})
	}
	printListTable(o.stdout, lists)
	if cursor != "" {
		fmt.Fprintf(o.stderr, "more lists: add --all\n")
	}
	return nil
}

// printListTable prints lists, one a line.
func printListTable(w io.Writer, lists []wire.ListStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LIST\tSTATUS\tCREATED\tROWS\tDONE\tFAILED\tTIER")
	for _, l := range lists {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", l.ListID, l.Status, l.CreatedAt.Format(time.RFC3339),
			l.Rows, l.Progress.Done, l.Progress.Failed, l.Tier)
	}
	_ = tw.Flush()
}
