package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// submitOptions are the flags and arguments of `domainclass submit`.
type submitOptions struct {
	*base
	invocation
	api                         apiOptions
	classifier, file, out       string
	tier                        string
	domainColumn, refColumn     string
	wait, asJSON, asCSV, ndjson bool
	list, dryRun                bool
	poll                        time.Duration
}

func (c *base) submitCommand() *cobra.Command {
	o := &submitOptions{base: c}
	cmd := &cobra.Command{
		Use:   "submit [flags] DOMAIN... (or --file FILE)",
		Short: "a client: submit domains (any number), wait, print results",
		Long: "submit sends domains to the API and, with --wait, shows progress until they are answered.\n\n" +
			"Up to 10 distinct domains go as jobs: every input is checked first, and nothing is sent if one would be refused.\n" +
			"More (or --list) go as one list: --file is sent as it is (CSV when its first line has a comma, one domain\n" +
			"per line otherwise), and rows that are not domains come back REJECTED in the results.\n\n" +
			waitExitStatus,
	}
	f := cmd.Flags()
	apiFlags(cmd, c.environ, &o.api.url, &o.api.key)
	f.StringVar(&o.classifier, "classifier", classifier.DefaultClassifier, "the classifier to ask")
	f.StringVar(&o.file, "file", "", "read domains from FILE (- for stdin): one per line, or CSV with a \"domain\" column (and an optional \"ref\")")
	f.BoolVar(&o.list, "list", false, "send one list even for 10 domains or fewer (more are always a list)")
	f.StringVar(&o.domainColumn, "domain-column", "", "the column of a CSV --file that holds the domains (any case; default \"domain\"); the file goes as a list")
	f.StringVar(&o.refColumn, "ref-column", "", "the column of a CSV --file kept as each row's ref, your id to join back (default \"ref\" when there is one)")
	f.StringVar(&o.tier, "tier", classifier.TierStandard, "a list's tier: standard (one model call at a time, minutes) or economy (the provider's Batch API: about half the cost, within 24 hours)")
	f.BoolVar(&o.dryRun, "dry-run", false, "send a list only to estimate it (domains overridden, cached, fresh; model calls, cost, time)")
	f.BoolVar(&o.wait, "wait", false, "wait for the jobs or the list to finish, showing progress, then print the results")
	f.StringVar(&o.out, "out", "", "with --wait: write the results to FILE instead of stdout (a list's: CSV)")
	f.BoolVar(&o.asJSON, "json", false, "with --wait: print the jobs' results as one JSON document (for a list, a deprecated name of --ndjson); with --dry-run: the estimate")
	f.BoolVar(&o.ndjson, "ndjson", false, "with --wait: print the results as NDJSON, one JSON object per line (the format of \"lists results --ndjson\")")
	f.BoolVar(&o.asCSV, "csv", false, "with --wait: print the results as CSV (a list's always are)")
	f.DurationVar(&o.poll, "poll", time.Second, "with --wait: how often to ask for progress")
	return command(cmd, o)
}

// waitExitStatus is the --help of the commands that wait for work: what
// their exit status tells a script.
const waitExitStatus = "Exit status: 0 when the work ended with every row answered (rows REJECTED at upload, reported then,\n" +
	"do not count); 3 when it ended with rows FAILED (a job or list given up included): the results are written\n" +
	"all the same; 1 on an error (the API refused or could not be reached, a list was cancelled, Ctrl-C);\n" +
	"2 on a usage error. Without --wait, 0 once the work was accepted."

// Validate refuses flags that contradict each other before anything is
// read or sent.
func (o *submitOptions) Validate() error {
	switch {
	case btoi(o.asJSON)+btoi(o.asCSV)+btoi(o.ndjson) > 1:
		return usagef("choose one of --json, --ndjson and --csv")
	case o.dryRun && o.ndjson:
		return usagef("--ndjson prints results, and a dry run has none (--json prints the estimate as JSON)")
	case o.dryRun && o.wait:
		return usagef("--dry-run only estimates: it sends nothing to wait for")
	case o.dryRun && o.asCSV:
		return usagef("--csv prints results, and a dry run has none (--json prints the estimate as JSON)")
	case (o.asJSON || o.asCSV || o.ndjson) && !o.wait && !o.dryRun:
		return usagef("--json, --ndjson and --csv print results, so they need --wait")
	case o.out != "" && !o.wait:
		return usagef("--out writes the results, so it needs --wait")
	case o.tier != classifier.TierStandard && o.tier != classifier.TierEconomy:
		return usagef("--tier must be standard or economy, not %q", o.tier)
	case o.poll < 100*time.Millisecond:
		return usagef("--poll must be at least 100ms")
	case len(o.args) == 0 && o.file == "":
		return usagef("no domains: give them as arguments or with --file")
	case (o.domainColumn != "" || o.refColumn != "") && o.file == "":
		return usagef("--domain-column and --ref-column name columns of a CSV --file")
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// apiFlags adds --url and --api-key, defaulting to DOMAINCLASS_URL and
// DOMAINCLASS_API_KEY.
func apiFlags(cmd *cobra.Command, environ []string, url, key *string) {
	f := cmd.Flags()
	f.StringVar(url, "url", cmp.Or(getenv(environ, "DOMAINCLASS_URL"), "http://127.0.0.1:8080"), "the API's base URL (DOMAINCLASS_URL)")
	f.StringVar(key, "api-key", getenv(environ, "DOMAINCLASS_API_KEY"), "your API key (DOMAINCLASS_API_KEY)")
}

// hint is what to do about err, when the command line knows better than
// the error: an API that is not there at all is started, or looked for
// elsewhere.
func hint(err error) string {
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		return "; start one with `go tool task up` (or `domainclass all`), or give its address with --url or DOMAINCLASS_URL"
	}
	return ""
}

// getenv is the value of name in environ, "" when it is not set.
func getenv(environ []string, name string) string {
	for _, kv := range slices.Backward(environ) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// apiClient is a client of the API that says on stderr why it retries.
func (c *base) apiClient(url, key string) *client.Client {
	api := client.New(url, key)
	api.OnRetry = func(reason string, wait time.Duration) {
		fmt.Fprintf(c.stderr, "%s; retrying in %s\n", printable(reason), wait)
	}
	return api
}

// Run sends the inputs as jobs of ten when they are 10 distinct domains
// or fewer (checking every input first: nothing is sent if one would be
// refused), and as one list otherwise or with --list or --dry-run; with
// --wait it polls until all have ended.
func (o *submitOptions) Run(ctx context.Context) error {
	inputs := o.args
	var src *domainFile
	if o.file != "" {
		var err error
		if src, err = o.openDomainFile(o.file); err != nil {
			return err
		}
		defer src.Close()
	}
	listMode := o.list || o.dryRun || o.domainColumn != "" || o.refColumn != "" // a column mapping is the API's, for lists
	if !listMode {
		n, err := countDistinct(inputs, src, wire.MaxDomainsPerJob+1)
		if err != nil {
			return err
		}
		listMode = n > wire.MaxDomainsPerJob
	}
	if listMode {
		return o.submitList(ctx, inputs, src)
	}
	return o.submitJobs(ctx, inputs, src)
}

// submitJobs checks every input, sends them as jobs of ten, and with
// --wait polls until all have ended.
func (o *submitOptions) submitJobs(ctx context.Context, inputs []string, src *domainFile) error {
	all := len(inputs)
	var badRows []wire.RejectedRow
	if src != nil {
		inputs = slices.Clip(inputs)
		err := src.rows(func(r db.ListRowIn) bool {
			all++
			if r.Reason != "" {
				badRows = append(badRows, wire.RejectedRow{Row: r.Row, Input: r.Input, Reason: r.Reason})
			} else {
				inputs = append(inputs, r.Input)
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	domains, bad := classifier.NormalizeDomains(inputs)
	if len(bad)+len(badRows) > 0 {
		for _, b := range bad {
			fmt.Fprintf(o.stderr, "  %q: %s\n", b.Input, b.Reason)
		}
		for _, r := range badRows { // as the server says them of a list (printAccepted)
			fmt.Fprintf(o.stderr, "  row %d %q: %s\n", r.Row, r.Input, r.Reason)
		}
		return fmt.Errorf("%d of %d domains cannot be classified (listed above); nothing was submitted", len(bad)+len(badRows), all)
	}
	api := o.apiClient(o.api.url, o.api.key)
	ids, err := o.sendJobs(ctx, api, domains)
	if err != nil || !o.wait {
		return err
	}

	progress := newProgress(o.stderr, "domains")
	reports, err := api.Wait(ctx, ids, o.poll, progress.jobs(len(domains)))
	progress.finish()
	if err != nil {
		if ctx.Err() != nil {
			printJobIDs(o.stderr, "stopped waiting; the jobs go on", ids)
			return errors.New("interrupted; the jobs were not cancelled")
		}
		printJobIDs(o.stderr, "stopped waiting after an error; the jobs go on", ids)
		return err
	}
	if err := o.printJobResults(reports); err != nil {
		return err
	}
	var failed []string
	rows := 0
	for _, r := range reports {
		if r.Status == classifier.StatusFailed {
			failed = append(failed, fmt.Sprintf("job %s failed: %s", r.JobID, r.Error))
			continue
		}
		for _, res := range r.Results {
			if res.Status == classifier.StatusFailed {
				rows++
			}
		}
	}
	if rows > 0 {
		failed = append(failed, fmt.Sprintf("%d of %d domains FAILED (the reason of each is in its error column); "+
			"submit them again to ask again", rows, len(domains)))
	}
	if len(failed) > 0 {
		return &rowsFailedError{strings.Join(failed, "; ")}
	}
	return nil
}

// sendJobs sends the domains as jobs of ten and returns their ids; without
// --wait it prints each id and its status URL.
func (o *submitOptions) sendJobs(ctx context.Context, api *client.Client, domains []classifier.DomainInput) ([]string, error) {
	runID := make([]byte, 8)
	_, _ = rand.Read(runID)
	var ids []string
	for i := 0; i < len(domains); i += wire.MaxDomainsPerJob {
		var chunk []string
		for _, d := range domains[i:min(i+wire.MaxDomainsPerJob, len(domains))] {
			chunk = append(chunk, d.Input)
		}
		// One Idempotency-Key per job: a retry after a lost answer never
		// makes a second job.
		a, err := api.Classify(ctx, wire.ClassifyRequest{Classifier: o.classifier, Domains: chunk},
			fmt.Sprintf("submit-%x-%d", runID, i/wire.MaxDomainsPerJob))
		if err != nil {
			printJobIDs(o.stderr, "submitted before the error", ids)
			return nil, err
		}
		ids = append(ids, a.JobID)
		fmt.Fprintf(o.stderr, "job %s: %d domains\n", a.JobID, len(chunk))
	}
	if !o.wait {
		for _, id := range ids {
			fmt.Fprintf(o.stdout, "%s\t%s/domains/classify/%s\n", id, api.BaseURL, id)
		}
	}
	return ids, nil
}

// printJobResults prints the jobs' results on stdout, or into --out.
func (o *submitOptions) printJobResults(reports []*wire.JobReport) error {
	if o.out == "" {
		return printResults(o.stdout, reports, o.format())
	}
	return writeFileAtomically(o.out, func(w io.Writer) error { return printResults(w, reports, o.format()) })
}

// resultFormat is how results are printed: a table, or one of these.
type resultFormat struct{ asJSON, ndjson, asCSV bool }

func (o *submitOptions) format() resultFormat {
	return resultFormat{asJSON: o.asJSON, ndjson: o.ndjson, asCSV: o.asCSV}
}

// resultRow is one domain's answer as submit prints it: the API's, with
// the job's id first and the answer under the classifier's own field too.
type resultRow struct {
	JobID string `json:"job_id"`
	wire.ResultReport
}

// MarshalJSON writes {"job_id": ..., then the result as the API shows it}
// (the embedded report's MarshalJSON would leave the id out).
func (r resultRow) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ResultReport)
	if err != nil {
		return nil, err
	}
	id, _ := json.Marshal(r.JobID)
	return append(append(append([]byte(`{"job_id":`), id...), ','), b[1:]...), nil
}

func printResults(w io.Writer, reports []*wire.JobReport, o resultFormat) error {
	var rows []resultRow
	field := ""
	for _, rep := range reports {
		field = classifier.DefaultRegistry().AnswerField(rep.Classifier)
		for _, r := range rep.Results {
			r.AnswerField = field
			rows = append(rows, resultRow{JobID: rep.JobID, ResultReport: r})
		}
	}
	// One submit asks one classifier: its answer field names the column.
	column := cmp.Or(field, "answer")
	switch {
	case o.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case o.ndjson:
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case o.asCSV:
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"domain", "status", column, "confidence", "source", "reasoning", "error", "job_id"})
		for _, r := range rows {
			answer, conf := answerText(r.ResultReport, strconv.FormatBool)
			_ = cw.Write(csvcell.EscapeAll([]string{r.Domain, string(r.Status), answer, conf, string(r.Source), r.Reasoning,
				r.Error, r.JobID}))
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DOMAIN\tSTATUS\t%s\tCONFIDENCE\tSOURCE\tREASONING\n", strings.ToUpper(strings.TrimPrefix(column, "is_")))
	for _, r := range rows {
		answer, conf := answerText(r.ResultReport, yesNo)
		text := r.Reasoning
		if r.Status == classifier.StatusFailed {
			text = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Domain, r.Status, cmp.Or(answer, "-"), cmp.Or(conf, "-"),
			cmp.Or(string(r.Source), "-"), printable(text))
	}
	return tw.Flush()
}

// answerText is an answer's yes or no (as answer says it) and confidence,
// "" for none.
func answerText(r wire.ResultReport, answer func(bool) string) (string, string) {
	a, c := "", ""
	if r.Answer != nil {
		a = answer(*r.Answer)
	}
	if r.Confidence != nil {
		c = strconv.Itoa(*r.Confidence)
	}
	return a, c
}

func printJobIDs(w io.Writer, what string, ids []string) {
	if len(ids) > 0 {
		fmt.Fprintf(w, "%s: %s\n", what, strings.Join(ids, " "))
	}
}
