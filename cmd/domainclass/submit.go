package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/wire"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// submitOptions are the flags of `domainclass submit`.
type submitOptions struct {
	url, key, classifier, file, out string
	tier                            string
	domainColumn, refColumn         string
	wait, asJSON, asCSV, ndjson     bool
	list, dryRun                    bool
	poll                            time.Duration
}

func (c *cli) submitCommand() *cobra.Command {
	o := submitOptions{}
	cmd := &cobra.Command{
		Use:   "submit [flags] DOMAIN... (or --file FILE)",
		Short: "a client: submit domains (any number), wait, print results",
		Long: "submit sends domains to the API and, with --wait, shows progress until they are answered.\n\n" +
			"Up to 10 distinct domains go as jobs: every input is checked first, and nothing is sent if one would be refused.\n" +
			"More (or --list) go as one list: --file is sent as it is (CSV when its first line has a comma, one domain\n" +
			"per line otherwise), and rows that are not domains come back REJECTED in the results.",
		Args: func(_ *cobra.Command, args []string) error {
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
			case len(args) == 0 && o.file == "":
				return usagef("no domains: give them as arguments or with --file")
			case (o.domainColumn != "" || o.refColumn != "") && o.file == "":
				return usagef("--domain-column and --ref-column name columns of a CSV --file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return c.submit(cmd.Context(), o, args) },
	}
	f := cmd.Flags()
	apiFlags(cmd, c.environ, &o.url, &o.key)
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
	return cmd
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
	env, f := envMap(environ), cmd.Flags()
	f.StringVar(url, "url", cmp.Or(env["DOMAINCLASS_URL"], "http://127.0.0.1:8080"), "the API's base URL (DOMAINCLASS_URL)")
	f.StringVar(key, "api-key", env["DOMAINCLASS_API_KEY"], "your API key (DOMAINCLASS_API_KEY)")
}

// apiClient is a client of the API that says on stderr why it retries.
func (c *cli) apiClient(url, key string) *client.Client {
	api := client.New(url, key)
	api.OnRetry = func(reason string, wait time.Duration) {
		fmt.Fprintf(c.stderr, "%s; retrying in %s\n", printable(reason), wait)
	}
	return api
}

// submit sends the inputs as jobs of ten when they are 10 distinct domains
// or fewer (checking every input first: nothing is sent if one would be
// refused), and as one list otherwise or with --list or --dry-run; with
// --wait it polls until all have ended.
func (c *cli) submit(ctx context.Context, o submitOptions, inputs []string) error {
	var src *source
	if o.file != "" {
		var err error
		if src, err = c.openSource(o.file); err != nil {
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
		return c.submitList(ctx, o, inputs, src)
	}

	if src != nil {
		more, err := src.domains()
		if err != nil {
			return err
		}
		inputs = append(inputs, more...)
	}
	domains, bad := classifier.NormalizeDomains(inputs)
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintf(c.stderr, "  %q: %s\n", b.Input, b.Reason)
		}
		return fmt.Errorf("%d of %d domains cannot be classified (listed above); nothing was submitted", len(bad), len(inputs))
	}

	api := c.apiClient(o.url, o.key)
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
			printJobIDs(c.stderr, "submitted before the error", ids)
			return err
		}
		ids = append(ids, a.JobID)
		fmt.Fprintf(c.stderr, "job %s: %d domains\n", a.JobID, len(chunk))
	}
	if !o.wait {
		for _, id := range ids {
			fmt.Fprintf(c.stdout, "%s\t%s/domains/classify/%s\n", id, api.BaseURL, id)
		}
		return nil
	}

	progress := newProgress(c.stderr, len(domains), len(ids))
	reports, err := api.Wait(ctx, ids, o.poll, progress.set)
	progress.finish()
	if err != nil {
		if ctx.Err() != nil {
			printJobIDs(c.stderr, "stopped waiting; the jobs go on", ids)
			return errors.New("interrupted; the jobs were not cancelled")
		}
		printJobIDs(c.stderr, "stopped waiting after an error; the jobs go on", ids)
		return err
	}
	if err := c.printJobResults(reports, o); err != nil {
		return err
	}
	var failed []string
	for _, r := range reports {
		if r.Status == classifier.StatusFailed {
			failed = append(failed, fmt.Sprintf("job %s failed: %s", r.JobID, r.Error))
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// printJobResults prints the jobs' results on stdout, or into --out.
func (c *cli) printJobResults(reports []*wire.JobReport, o submitOptions) error {
	if o.out == "" {
		return printResults(c.stdout, reports, o)
	}
	return writeFileAtomically(o.out, func(w io.Writer) error { return printResults(w, reports, o) })
}

// progress shows how far the jobs are (progressLine).
type progress struct {
	*progressLine
	total, jobs int
}

func newProgress(w io.Writer, total, jobs int) *progress {
	return &progress{progressLine: newProgressLine(w, "domains"), total: total, jobs: jobs}
}

// set shows the reports of one polling round.
func (p *progress) set(reports []*wire.JobReport) {
	done, ended := 0, 0
	for _, r := range reports {
		done += r.Progress.Done
		if r.Ended() {
			ended++
		}
	}
	p.progressLine.set(done, p.total, fmt.Sprintf(", %d/%d jobs finished", ended, p.jobs))
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

func printResults(w io.Writer, reports []*wire.JobReport, o submitOptions) error {
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

// scanDomainList reads one domain per line (blank lines and # comments
// skipped), or a CSV whose header names a "domain" column, and calls each
// with every input in order until it returns false. lenient skips CSV
// records that cannot be read instead of failing.
func scanDomainList(r io.Reader, lenient bool, each func(string) bool) error {
	br := bufio.NewReader(r)
	csvFile, err := firstLineHasComma(br)
	if err != nil {
		return err
	}
	if csvFile {
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1
		header, err := cr.Read()
		if err != nil {
			return fmt.Errorf("cannot read the CSV header: %w", err)
		}
		col := -1
		for i, h := range header {
			if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), "domain") {
				col = i
			}
		}
		if col < 0 {
			return fmt.Errorf("the CSV header has no \"domain\" column: %q", strings.Join(header, ","))
		}
		for {
			rec, err := cr.Read()
			var perr *csv.ParseError
			switch {
			case err == io.EOF:
				return nil
			case lenient && errors.As(err, &perr):
				continue
			case err != nil:
				return fmt.Errorf("cannot read the CSV: %w", err)
			}
			if col < len(rec) && strings.TrimSpace(rec[col]) != "" {
				if !each(strings.TrimSpace(rec[col])) {
					return nil
				}
			}
		}
	}
	sc := bufio.NewScanner(br)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			if !each(line) {
				return nil
			}
		}
	}
	return sc.Err()
}

// readDomainList reads every input of a domain list (see scanDomainList).
func readDomainList(r io.Reader) ([]string, error) {
	var out []string
	err := scanDomainList(r, false, func(s string) bool { out = append(out, s); return true })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstLineHasComma tells a CSV file from a list of domains: the first line
// of a CSV (its header) has a comma.
func firstLineHasComma(br *bufio.Reader) (bool, error) {
	first, err := br.Peek(4096)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return false, fmt.Errorf("cannot read the domain list: %w", err)
	}
	firstLine, _, _ := strings.Cut(string(first), "\n")
	return strings.Contains(firstLine, ","), nil
}

// countDistinct counts the distinct domains among inputs and src's, up to
// limit (it stops reading there). Inputs that are not domains, and CSV
// lines that cannot be read, do not count: a list would keep them as
// rejected rows.
func countDistinct(inputs []string, src *source, limit int) (int, error) {
	seen := map[string]bool{}
	each := func(in string) bool {
		if d, err := classifier.NormalizeDomain(in); err == nil {
			seen[d] = true
		}
		return len(seen) < limit
	}
	for _, in := range inputs {
		if !each(in) {
			return len(seen), nil
		}
	}
	if src != nil {
		r, err := src.open()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		if err := scanDomainList(r, true, each); err != nil {
			return 0, err
		}
	}
	return len(seen), nil
}
