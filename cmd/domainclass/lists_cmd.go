package main

import (
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

func (c *cli) listsCommand() *cobra.Command {
	return group("lists", "a client: your lists, a list's status, results, waiting, retry, cancel (lists are sent with submit)",
		c.listsLsCommand(), c.listsStatusCommand(), c.listsWaitCommand(), c.listsResultsCommand(), c.listsRetryCommand(),
		c.listsCancelCommand())
}

// listID checks the one argument, a list id.
func listID(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("%s takes 1 list id, got %d", cmd.CommandPath(), len(args))
	}
	if _, err := uuid.Parse(args[0]); err != nil {
		return usagef("%q is not a list id (a UUID, as submit printed it)", args[0])
	}
	return nil
}

func (c *cli) listsStatusCommand() *cobra.Command {
	var (
		url, key string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "status LIST_ID",
		Short: "print a list's status and progress",
		Args:  listID,
		RunE: func(cmd *cobra.Command, args []string) error {
			api := c.apiClient(url, key)
			s, err := api.List(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printListStatus(c.stdout, s, api.BaseURL, asJSON)
		},
	}
	apiFlags(cmd, c.environ, &url, &key)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON, as the API answers it")
	return cmd
}

func (c *cli) listsCancelCommand() *cobra.Command {
	var (
		url, key string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "cancel LIST_ID",
		Short: "cancel a list: rows not yet answered become CANCELLED, and no new model call starts for it",
		Args:  listID,
		RunE: func(cmd *cobra.Command, args []string) error {
			api := c.apiClient(url, key)
			// Asked first, so that cancelling a list that has ended says so.
			s, err := api.List(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			wasEnded := s.Ended()
			if !wasEnded {
				if s, err = api.CancelList(cmd.Context(), args[0]); err != nil {
					return err
				}
			}
			if wasEnded || s.Status != classifier.StatusCancelled {
				fmt.Fprintf(c.stderr, "list %s had already ended (%s); nothing was cancelled\n", s.ListID, s.Status)
			}
			return printListStatus(c.stdout, s, api.BaseURL, asJSON)
		},
	}
	apiFlags(cmd, c.environ, &url, &key)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON, as the API answers it")
	return cmd
}

// rowStatuses are the statuses of a list's rows, for --status.
var rowStatuses = []classifier.Status{classifier.StatusPending, classifier.StatusCompleted, classifier.StatusFailed,
	classifier.StatusRejected, classifier.StatusCancelled}

func (c *cli) listsResultsCommand() *cobra.Command {
	var (
		url, key, out, status string
		ndjson                bool
		after                 int
	)
	cmd := &cobra.Command{
		Use:   "results LIST_ID [--out FILE] [--ndjson] [--status S,...] [--after ROW]",
		Short: "write a list's rows with their answers, in upload order (CSV, or NDJSON)",
		Args: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usagef("--after must be a row number, 0 or more")
			}
			return listID(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := client.ResultsOptions{NDJSON: ndjson, After: after}
			for _, s := range strings.Split(status, ",") {
				st := classifier.Status(strings.ToUpper(strings.TrimSpace(s)))
				switch {
				case st == "":
				case !slices.Contains(rowStatuses, st):
					return usagef("--status: %q is not one of PENDING, COMPLETED, FAILED, REJECTED, CANCELLED", s)
				default:
					opts.Status = append(opts.Status, string(st))
				}
			}
			return c.writeListResults(cmd.Context(), c.apiClient(url, key), args[0], out, opts)
		},
	}
	apiFlags(cmd, c.environ, &url, &key)
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "write to FILE (whole, or not at all) instead of stdout")
	f.BoolVar(&ndjson, "ndjson", false, "one JSON object per row instead of CSV")
	f.StringVar(&status, "status", "", "only rows with these statuses: PENDING, COMPLETED, FAILED, REJECTED, CANCELLED (comma-separated)")
	f.IntVar(&after, "after", 0, "start after this row (to resume a download)")
	return cmd
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
	fmt.Fprintf(tw, "model cost\t%s\n", usd(s.CostUSD))
	fmt.Fprintf(tw, "results\t%s%s\n", baseURL, s.ResultsURL)
	if s.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", s.Error)
	}
	return tw.Flush()
}
