package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
)

// submitList sends the inputs as one list: the --file as it is (CSV when
// its first line has a comma, one domain per line otherwise), after the
// domains given as arguments, one per line. Nothing is checked locally: the
// API keeps rows that are not domains as REJECTED and says which.
func (o *submitOptions) submitList(ctx context.Context, args []string, src *domainFile) error {
	open, contentType, err := listBody(args, src, o.domainColumn != "" || o.refColumn != "")
	if err != nil {
		return err
	}
	api := o.apiClient(o.api.url, o.api.key)
	opts := client.ListOptions{Classifier: o.classifier, ContentType: contentType, Tier: o.tier,
		DomainColumn: o.domainColumn, RefColumn: o.refColumn}
	if o.dryRun {
		est, err := api.EstimateList(ctx, open, opts)
		if err != nil {
			return inFlagWords(err)
		}
		return printEstimate(o.stdout, est, o.asJSON)
	}

	// One Idempotency-Key for the list: a retry after a lost answer never
	// makes a second one.
	runID := make([]byte, 8)
	_, _ = rand.Read(runID)
	opts.IdempotencyKey = fmt.Sprintf("submit-list-%x", runID)
	a, err := api.UploadList(ctx, open, opts)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted while sending the list")
		}
		return inFlagWords(err)
	}
	printAccepted(o.stderr, a)
	if !o.wait {
		fmt.Fprintf(o.stdout, "%s\t%s%s\n", a.ListID, api.BaseURL, a.StatusURL)
		return nil
	}

	if o.asJSON {
		fmt.Fprintln(o.stderr, "--json on a list is deprecated: it is --ndjson (one JSON object per row, as \"lists results --ndjson\")")
	}
	return o.waitList(ctx, api, a.ListID, waitOptions{out: o.out, ndjson: o.ndjson || o.asJSON, poll: o.poll})
}

// inFlagWords is err with the API's names of a CSV's columns (its query
// parameters ?domain_column= and ?ref_column=) said as the flags that set
// them, for the problems that name them: a user of submit has never seen
// the query.
func inFlagWords(err error) error {
	var perr *client.ProblemError
	if !errors.As(err, &perr) {
		return err
	}
	switch t := perr.Problem.Type; {
	case strings.HasSuffix(t, "/problems/no-domain-column"), strings.HasSuffix(t, "/problems/no-ref-column"):
	default:
		return err
	}
	said := *perr
	said.Problem.Detail = flagWords.Replace(perr.Problem.Detail)
	return &said
}

var flagWords = strings.NewReplacer("?domain_column=", "--domain-column", "(domain_column)", "(--domain-column)",
	"?ref_column=", "--ref-column", "(ref_column)", "(--ref-column)")

// printAccepted says what the API made of an upload: its counts, and a
// sample of the rows it rejected.
func printAccepted(w io.Writer, a *wire.ListAccepted) {
	fmt.Fprintf(w, "list %s: %d rows, %d domains, %d duplicates, %d rejected\n",
		a.ListID, a.Rows, a.Domains, a.Duplicates, a.Rejected)
	for _, r := range a.RejectedSample {
		fmt.Fprintf(w, "  row %d %q: %s\n", r.Row, r.Input, r.Reason)
	}
	if more := a.Rejected - len(a.RejectedSample); more > 0 {
		fmt.Fprintf(w, "  and %d more rejected rows (status REJECTED in the results)\n", more)
	}
}

// writeListResults writes a list's results to stdout, or into out (whole
// or not at all).
func (c *base) writeListResults(ctx context.Context, api *client.Client, id, out string, opts client.ResultsOptions) error {
	var err error
	if out == "" {
		_, err = api.ListResults(ctx, id, c.stdout, opts)
	} else {
		err = writeFileAtomically(out, func(w io.Writer) error {
			_, err := api.ListResults(ctx, id, w, opts)
			return err
		})
	}
	switch {
	case err == nil:
		if out != "" {
			fmt.Fprintf(c.stderr, "results of list %s written to %s\n", id, out)
		}
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted while writing the results; get them with \"domainclass lists results %s\"", id)
	}
	var perr *client.ProblemError
	if errors.As(err, &perr) {
		return err
	}
	return fmt.Errorf("%w; get them again with \"domainclass lists results %s\"", err, id)
}

// writeFileAtomically writes path through write: into a temporary file
// next to it, renamed to path only when write succeeded, so that path is
// never a part that looks whole.
func writeFileAtomically(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.part")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, errors.Unwrap(err))
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, errors.Unwrap(err))
	}
	done = true
	return nil
}

// printEstimate prints a dry run's estimate: a block to read, or JSON.
func printEstimate(w io.Writer, est *wire.ListEstimate, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(est)
	}
	model := est.Model
	if model == "" {
		model = "none configured"
	}
	cost := func(t wire.TierEstimate) string {
		if t.EstimatedCostUSD == nil {
			return fmt.Sprintf("unknown (no price for model %s)", model)
		}
		return usd(*t.EstimatedCostUSD)
	}
	standard, economy := est.Tiers[classifier.TierStandard], est.Tiers[classifier.TierEconomy]
	mark := map[string]string{est.Tier: "  (this list)"}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, line := range [][2]any{
		{"rows", est.Rows}, {"domains", est.Domains}, {"duplicates", est.Duplicates}, {"rejected", est.Rejected},
		{"overridden", est.Override}, {"cached", est.Cache}, {"fresh", est.LLM}, {"model calls", est.ModelCalls},
		{"model", model},
		{"standard", cost(standard) + ", " + about(time.Duration(standard.EstimatedSeconds*float64(time.Second))) + mark[classifier.TierStandard]},
		{"economy", cost(economy) + ", within 24 hours (Batch API)" + mark[classifier.TierEconomy]},
	} {
		fmt.Fprintf(tw, "%s\t%v\n", line[0], line[1])
	}
	if est.Basis.Summary != "" { // what bounds the standard tier's time, and which setting raises it
		fmt.Fprintf(tw, "time basis\t%s\n", printable(est.Basis.Summary))
	}
	return tw.Flush()
}

func usd(v float64) string {
	if v != 0 && v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// about is "about " and roughly(d), or "under a second".
func about(d time.Duration) string {
	if d < time.Second/2 {
		return "under a second"
	}
	return "about " + roughly(d)
}

// roughly is a duration as people say it: 40s, 2m30s, 23m, 1h05m.
func roughly(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	switch {
	case s < 1:
		return "under a second"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 3600:
		return fmt.Sprintf("%dm", (s+30)/60)
	}
	m := (s + 30) / 60
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
