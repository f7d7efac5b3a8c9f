package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// The callers' commands over a list sent with `submit`: its status, its
// results, cancelling it. They speak to the API, like submit.

func (c *base) listsCommand() *cobra.Command {
	return group("lists", "a client: your lists, a list's status, results, waiting, retry, cancel (lists are sent with submit)",
		c.listsLsCommand(), c.listsStatusCommand(), c.listsWaitCommand(), c.listsResultsCommand(), c.listsRetryCommand(),
		c.listsCancelCommand())
}

// apiOptions are the flags every caller's command has: where the API is
// and the caller's key.
type apiOptions struct{ url, key string }

// listID checks the one argument, a list id.
func (i *invocation) listID() error {
	if len(i.args) != 1 {
		return usagef("%s takes 1 list id, got %d", i.path(), len(i.args))
	}
	if _, err := uuid.Parse(i.args[0]); err != nil {
		return usagef("%q is not a list id (a UUID, as submit printed it)", i.args[0])
	}
	return nil
}

// listsStatus is `lists status`, and `lists cancel` with cancel set.
type listsStatus struct {
	*base
	invocation
	api    apiOptions
	asJSON bool
	cancel bool
}

func (c *base) listsStatusCommand() *cobra.Command {
	return c.listStatusCommand(&cobra.Command{
		Use:   "status LIST_ID",
		Short: "print a list's status and progress",
	}, false)
}

func (c *base) listsCancelCommand() *cobra.Command {
	return c.listStatusCommand(&cobra.Command{
		Use:   "cancel LIST_ID",
		Short: "cancel a list: rows not yet answered become CANCELLED, and no new model call starts for it",
	}, true)
}

func (c *base) listStatusCommand(cmd *cobra.Command, cancel bool) *cobra.Command {
	o := &listsStatus{base: c, cancel: cancel}
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the status as JSON, as the API answers it")
	return command(cmd, o)
}

func (o *listsStatus) Validate() error { return o.listID() }

func (o *listsStatus) Run(ctx context.Context) error {
	api := o.apiClient(o.api.url, o.api.key)
	// Asked first, so that cancelling a list that has ended says so.
	s, err := api.List(ctx, o.args[0])
	if err == nil && o.cancel {
		s, err = o.cancelList(ctx, api, s)
	}
	if err != nil {
		return err
	}
	return printListStatus(o.stdout, s, api.BaseURL, o.asJSON)
}

// cancelList cancels the list of status s unless it has ended, and says
// when nothing was cancelled.
func (o *listsStatus) cancelList(ctx context.Context, api *client.Client, s *wire.ListStatus) (*wire.ListStatus, error) {
	wasEnded := s.Ended()
	if !wasEnded {
		var err error
		if s, err = api.CancelList(ctx, o.args[0]); err != nil {
			return nil, err
		}
	}
	if wasEnded || s.Status != classifier.StatusCancelled {
		fmt.Fprintf(o.stderr, "list %s had already ended (%s); nothing was cancelled\n", s.ListID, s.Status)
	}
	return s, nil
}

// rowStatuses are the statuses of a list's rows, for --status.
var rowStatuses = []classifier.Status{classifier.StatusPending, classifier.StatusCompleted, classifier.StatusFailed,
	classifier.StatusRejected, classifier.StatusCancelled}

// listsResults is `lists results`.
type listsResults struct {
	*base
	invocation
	api         apiOptions
	out, status string
	ndjson      bool
	after       int
}

func (c *base) listsResultsCommand() *cobra.Command {
	o := &listsResults{base: c}
	cmd := &cobra.Command{
		Use:   "results LIST_ID [--out FILE] [--ndjson] [--status S,...] [--after ROW]",
		Short: "write a list's rows with their answers, in upload order (CSV, or NDJSON)",
	}
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "write to FILE (whole, or not at all) instead of stdout")
	f.BoolVar(&o.ndjson, "ndjson", false, "one JSON object per row instead of CSV")
	f.StringVar(&o.status, "status", "", "only rows with these statuses: PENDING, COMPLETED, FAILED, REJECTED, CANCELLED (comma-separated)")
	f.IntVar(&o.after, "after", 0, "start after this row (to resume a download)")
	return command(cmd, o)
}

func (o *listsResults) Validate() error {
	if o.after < 0 {
		return usagef("--after must be a row number, 0 or more")
	}
	if err := o.listID(); err != nil {
		return err
	}
	_, err := o.statuses()
	return err
}

// statuses reads --status.
func (o *listsResults) statuses() ([]string, error) {
	var out []string
	for _, s := range strings.Split(o.status, ",") {
		st := classifier.Status(strings.ToUpper(strings.TrimSpace(s)))
		switch {
		case st == "":
		case !slices.Contains(rowStatuses, st):
			return nil, usagef("--status: %q is not one of PENDING, COMPLETED, FAILED, REJECTED, CANCELLED", s)
		default:
			out = append(out, string(st))
		}
	}
	return out, nil
}

func (o *listsResults) Run(ctx context.Context) error {
	statuses, err := o.statuses()
	if err != nil {
		return err
	}
	opts := client.ResultsOptions{NDJSON: o.ndjson, After: o.after, Status: statuses}
	return o.writeListResults(ctx, o.apiClient(o.api.url, o.api.key), o.args[0], o.out, opts)
}

// listCost is what a list's model calls cost, or "unknown" when the model
// answered rows and nothing was charged: the price table does not list the
// model (a listed model's call costs more than the micro-dollar cost_usd
// is rounded to), as the dry run says "unknown" for it, not $0.00.
func listCost(s *wire.ListStatus) string {
	if s.CostUSD == 0 && s.Progress.LLM > 0 {
		return "unknown (no price for the model)"
	}
	return usd(s.CostUSD)
}

// printListStatus prints a list's status as a block to read, or as JSON.
func printListStatus(w io.Writer, s *wire.ListStatus, baseURL string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	p := s.Progress
	ended := "-"
	if s.CompletedAt != nil {
		ended = s.CompletedAt.Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "list\t%s\n", s.ListID)
	fmt.Fprintf(tw, "status\t%s\n", s.Status)
	fmt.Fprintf(tw, "classifier\t%s\n", s.Classifier)
	fmt.Fprintf(tw, "created\t%s\n", s.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "ended\t%s\n", ended)
	if s.ExpiresAt != nil {
		fmt.Fprintf(tw, "kept until\t%s (then purged: download the results before)\n", s.ExpiresAt.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "rows\t%d (%d distinct domains)\n", s.Rows, s.Domains)
	fmt.Fprintf(tw, "done\t%d/%d: %d completed, %d failed, %d rejected, %d cancelled\n",
		p.Done, p.Total, p.Completed, p.Failed, p.Rejected, p.Cancelled)
	known := "" // a list answered from the known list, before overrides
	if p.Known > 0 {
		known = fmt.Sprintf(", known %d", p.Known)
	}
	fmt.Fprintf(tw, "answered by\toverride %d, cache %d, model %d%s\n", p.Override, p.Cache, p.LLM, known)
	fmt.Fprintf(tw, "tier\t%s\n", s.Tier)
	fmt.Fprintf(tw, "model cost\t%s\n", listCost(s))
	fmt.Fprintf(tw, "results\t%s%s\n", baseURL, s.ResultsURL)
	if s.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", s.Error)
	}
	return tw.Flush()
}
