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
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/httpapi/client"
	"github.com/domainclass/domainclass/httpapi/wire"
)

// submitOptions are the flags of `domainclass submit`.
type submitOptions struct {
	url, key, classifier, file string
	wait, asJSON, asCSV        bool
	poll                       time.Duration
}

func (c *cli) submitCommand() *cobra.Command {
	env := envMap(c.environ)
	o := submitOptions{}
	cmd := &cobra.Command{
		Use:   "submit [flags] DOMAIN... (or --file FILE)",
		Short: "a client: submit domains (any number), wait, print results",
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case o.asJSON && o.asCSV:
				return usagef("choose --json or --csv, not both")
			case (o.asJSON || o.asCSV) && !o.wait:
				return usagef("--json and --csv print results, so they need --wait")
			case o.poll < 100*time.Millisecond:
				return usagef("--poll must be at least 100ms")
			case len(args) == 0 && o.file == "":
				return usagef("no domains: give them as arguments or with --file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return c.submit(cmd.Context(), o, args) },
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", cmp.Or(env["DOMAINCLASS_URL"], "http://127.0.0.1:8080"), "the API's base URL (DOMAINCLASS_URL)")
	f.StringVar(&o.key, "api-key", env["DOMAINCLASS_API_KEY"], "your API key (DOMAINCLASS_API_KEY)")
	f.StringVar(&o.classifier, "classifier", classifier.DefaultClassifier, "the classifier to ask")
	f.StringVar(&o.file, "file", "", "read domains from FILE (- for stdin): one per line, or CSV with a \"domain\" column")
	f.BoolVar(&o.wait, "wait", false, "wait for the jobs to finish, showing progress, then print the results")
	f.BoolVar(&o.asJSON, "json", false, "with --wait: print the results as JSON")
	f.BoolVar(&o.asCSV, "csv", false, "with --wait: print the results as CSV")
	f.DurationVar(&o.poll, "poll", time.Second, "with --wait: how often to ask for progress")
	return cmd
}

// submit checks every input first (nothing is sent if one would be
// refused), sends the distinct domains in jobs of ten, and with --wait
// polls until all have ended.
func (c *cli) submit(ctx context.Context, o submitOptions, inputs []string) error {
	if o.file != "" {
		more, err := c.readDomainFile(o.file)
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

	api := client.New(o.url, o.key)
	api.OnRetry = func(reason string, wait time.Duration) { fmt.Fprintf(c.stderr, "%s; retrying in %s\n", reason, wait) }
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
	if err := printResults(c.stdout, reports, o); err != nil {
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

func (c *cli) readDomainFile(path string) ([]string, error) {
	r := c.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", path, errors.Unwrap(err))
		}
		defer f.Close()
		r = f
	}
	return readDomainList(r)
}

// progress shows how far the jobs are: a bar on a terminal, a line per
// change otherwise.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	total    int
	jobs     int
	lastDone int
	lastEnd  int
}

func newProgress(w io.Writer, total, jobs int) *progress {
	p := &progress{w: w, total: total, jobs: jobs, lastDone: -1}
	if isTerminal(w) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(fmt.Sprintf("classifying %d domains in %d jobs", total, jobs)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
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
	if p.bar != nil {
		_ = p.bar.Set(done)
		return
	}
	if done != p.lastDone || ended != p.lastEnd {
		fmt.Fprintf(p.w, "progress: %d/%d domains done, %d/%d jobs finished\n", done, p.total, ended, p.jobs)
		p.lastDone, p.lastEnd = done, ended
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

type resultRow struct {
	JobID string `json:"job_id"`
	wire.ResultReport
}

func printResults(w io.Writer, reports []*wire.JobReport, o submitOptions) error {
	var rows []resultRow
	for _, rep := range reports {
		for _, r := range rep.Results {
			rows = append(rows, resultRow{JobID: rep.JobID, ResultReport: r})
		}
	}
	switch {
	case o.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case o.asCSV:
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"domain", "status", "is_cpg", "confidence", "source", "reasoning", "error", "job_id"})
		for _, r := range rows {
			answer, conf := answerText(r.ResultReport, strconv.FormatBool)
			_ = cw.Write([]string{r.Domain, string(r.Status), answer, conf, string(r.Source), r.Reasoning, r.Error, r.JobID})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tSTATUS\tCPG\tCONFIDENCE\tSOURCE\tREASONING")
	yesNo := func(b bool) string { return map[bool]string{true: "yes", false: "no"}[b] }
	for _, r := range rows {
		answer, conf := answerText(r.ResultReport, yesNo)
		text := r.Reasoning
		if r.Status == classifier.StatusFailed {
			text = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Domain, r.Status, cmp.Or(answer, "-"), cmp.Or(conf, "-"),
			cmp.Or(string(r.Source), "-"), text)
	}
	return tw.Flush()
}

// answerText is an answer's is_cpg (as answer says it) and confidence, "" for
// none.
func answerText(r wire.ResultReport, answer func(bool) string) (string, string) {
	a, c := "", ""
	if r.IsCPG != nil {
		a = answer(*r.IsCPG)
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

// readDomainList reads one domain per line (blank lines and # comments
// skipped), or a CSV whose header names a "domain" column.
func readDomainList(r io.Reader) ([]string, error) {
	br := bufio.NewReader(r)
	first, err := br.Peek(4096)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("cannot read the domain list: %w", err)
	}
	firstLine, _, _ := strings.Cut(string(first), "\n")
	if strings.Contains(firstLine, ",") {
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1
		header, err := cr.Read()
		if err != nil {
			return nil, fmt.Errorf("cannot read the CSV header: %w", err)
		}
		col := -1
		for i, h := range header {
			if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), "domain") {
				col = i
			}
		}
		if col < 0 {
			return nil, fmt.Errorf("the CSV header has no \"domain\" column: %q", strings.Join(header, ","))
		}
		var out []string
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				return out, nil
			} else if err != nil {
				return nil, fmt.Errorf("cannot read the CSV: %w", err)
			}
			if col < len(rec) && strings.TrimSpace(rec[col]) != "" {
				out = append(out, strings.TrimSpace(rec[col]))
			}
		}
	}
	var out []string
	sc := bufio.NewScanner(br)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
