package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/domainclass/domainclass/classifier"
)

// maxDomainsPerJob is the API's limit of distinct domains per job.
const maxDomainsPerJob = 10

// submitClient talks to a domainclass API as a caller would.
type submitClient struct {
	base   string
	key    string
	http   *http.Client
	stderr io.Writer
}

type submitted struct {
	ID      string
	Domains int
	Report  *classifier.JobReport
}

func runSubmit(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	env := envMap(environ)
	fs := newFlagSet("submit", "submit [flags] DOMAIN... (or --file FILE)", stdout)
	url := fs.String("url", cmpStr(env["DOMAINCLASS_URL"], "http://127.0.0.1:8080"), "the API's base URL (DOMAINCLASS_URL)")
	key := fs.String("api-key", env["DOMAINCLASS_API_KEY"], "your API key (DOMAINCLASS_API_KEY)")
	cls := fs.String("classifier", classifier.DefaultClassifier, "the classifier to ask")
	file := fs.String("file", "", "read domains from FILE (- for stdin): one per line, or CSV with a \"domain\" column")
	wait := fs.Bool("wait", false, "wait for the jobs to finish, showing progress, then print the results")
	asJSON := fs.Bool("json", false, "with --wait: print the results as JSON")
	asCSV := fs.Bool("csv", false, "with --wait: print the results as CSV")
	poll := fs.Duration("poll", time.Second, "with --wait: how often to ask for progress")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *asJSON && *asCSV {
		return &usageError{"choose --json or --csv, not both"}
	}
	if (*asJSON || *asCSV) && !*wait {
		return &usageError{"--json and --csv print results, so they need --wait"}
	}
	if *poll < 100*time.Millisecond {
		return &usageError{"--poll must be at least 100ms"}
	}

	inputs := fs.Args()
	if *file != "" {
		var r io.Reader = stdin
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return fmt.Errorf("cannot open %s: %w", *file, errors.Unwrap(err))
			}
			defer f.Close()
			r = f
		}
		more, err := readDomainList(r)
		if err != nil {
			return err
		}
		inputs = append(inputs, more...)
	}
	if len(inputs) == 0 {
		return &usageError{"no domains: give them as arguments or with --file"}
	}

	// Check every input here first, so that nothing is submitted when any
	// would be refused, and split the distinct domains into jobs of ten.
	domains, bad := classifier.NormalizeDomains(inputs)
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintf(stderr, "  %q: %s\n", b.Input, b.Reason)
		}
		return fmt.Errorf("%d of %d domains cannot be classified (listed above); nothing was submitted", len(bad), len(inputs))
	}
	var chunks [][]string
	for i := 0; i < len(domains); i += maxDomainsPerJob {
		var chunk []string
		for _, d := range domains[i:min(i+maxDomainsPerJob, len(domains))] {
			chunk = append(chunk, d.Input)
		}
		chunks = append(chunks, chunk)
	}

	c := &submitClient{base: strings.TrimRight(*url, "/"), key: *key, http: &http.Client{Timeout: 30 * time.Second}, stderr: stderr}
	runID := make([]byte, 8)
	_, _ = rand.Read(runID)
	var jobs []*submitted
	for i, chunk := range chunks {
		id, err := c.create(ctx, *cls, chunk, fmt.Sprintf("submit-%x-%d", runID, i))
		if err != nil {
			printJobIDs(stderr, "submitted before the error", jobs)
			return err
		}
		jobs = append(jobs, &submitted{ID: id, Domains: len(chunk)})
		fmt.Fprintf(stderr, "job %s: %d domains\n", id, len(chunk))
	}
	if !*wait {
		for _, j := range jobs {
			fmt.Fprintf(stdout, "%s\t%s/domains/classify/%s\n", j.ID, c.base, j.ID)
		}
		return nil
	}

	if err := c.waitAll(ctx, jobs, len(domains), *poll); err != nil {
		if ctx.Err() != nil {
			printJobIDs(stderr, "stopped waiting; the jobs go on", jobs)
			return errors.New("interrupted; the jobs were not cancelled")
		}
		printJobIDs(stderr, "stopped waiting after an error; the jobs go on", jobs)
		return err
	}

	switch {
	case *asJSON:
		err := printJSON(stdout, jobs)
		if err != nil {
			return err
		}
	case *asCSV:
		if err := printCSV(stdout, jobs); err != nil {
			return err
		}
	default:
		if err := printTable(stdout, jobs); err != nil {
			return err
		}
	}
	var failed []string
	for _, j := range jobs {
		if j.Report.Status == classifier.StatusFailed {
			failed = append(failed, fmt.Sprintf("job %s failed: %s", j.ID, j.Report.Error))
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// create submits one job, retrying with the same Idempotency-Key when the
// network fails or the service asks to wait (429, 503).
func (c *submitClient) create(ctx context.Context, cls string, domains []string, idemKey string) (string, error) {
	body, _ := json.Marshal(map[string]any{"classifier": cls, "domains": domains})
	deadline := time.Now().Add(5 * time.Minute)
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/domains/classify", bytes.NewReader(body))
		if err != nil {
			return "", fmt.Errorf("invalid --url: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", strconv.Quote(idemKey))
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := c.http.Do(req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			wait = time.Duration(attempt) * time.Second
			fmt.Fprintf(c.stderr, "cannot reach %s (%v); retrying in %s\n", c.base, unwrapURLError(err), wait)
		default:
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusAccepted:
				var a struct {
					JobID string `json:"job_id"`
				}
				if err := json.Unmarshal(b, &a); err != nil || a.JobID == "" {
					return "", fmt.Errorf("unexpected 202 response: %.200s", b)
				}
				return a.JobID, nil
			case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusConflict:
				wait = retryAfter(resp.Header, time.Duration(attempt)*time.Second)
				fmt.Fprintf(c.stderr, "%s: %s; retrying in %s\n", resp.Status, problemDetail(b), wait)
			default:
				return "", fmt.Errorf("%s: %s", resp.Status, problemDetail(b))
			}
		}
		if time.Now().Add(wait).After(deadline) {
			return "", errors.New("gave up submitting after 5 minutes of retries")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// waitAll polls every unfinished job until all have ended, showing domains
// done over total: a bar on a terminal, a line per change otherwise.
func (c *submitClient) waitAll(ctx context.Context, jobs []*submitted, total int, every time.Duration) error {
	progress := newProgress(c.stderr, total, len(jobs))
	defer progress.finish()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		done, ended := 0, 0
		for _, j := range jobs {
			if j.Report == nil || !jobEnded(j.Report) {
				rep, err := c.get(ctx, j.ID)
				if err != nil {
					return err
				}
				j.Report = rep
			}
			done += j.Report.Progress.Done
			if jobEnded(j.Report) {
				ended++
			}
		}
		progress.set(done, ended)
		if ended == len(jobs) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

func (c *submitClient) get(ctx context.Context, id string) (*classifier.JobReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/domains/classify/"+id, nil)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.http.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				rep := new(classifier.JobReport)
				if err := json.Unmarshal(b, rep); err != nil {
					return nil, fmt.Errorf("unreadable job status: %w", err)
				}
				return rep, nil
			}
			if resp.StatusCode != http.StatusServiceUnavailable || attempt > 30 {
				return nil, fmt.Errorf("job %s: %s: %s", id, resp.Status, problemDetail(b))
			}
		} else if ctx.Err() != nil || attempt > 30 {
			return nil, unwrapURLError(err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func jobEnded(r *classifier.JobReport) bool {
	return r.Status == classifier.StatusCompleted || r.Status == classifier.StatusFailed
}

// progress shows how far the jobs are.
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
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
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

func (p *progress) set(done, ended int) {
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
	classifier.ResultReport
}

func rows(jobs []*submitted) []resultRow {
	var out []resultRow
	for _, j := range jobs {
		for _, r := range j.Report.Results {
			out = append(out, resultRow{JobID: j.ID, ResultReport: r})
		}
	}
	return out
}

func printTable(w io.Writer, jobs []*submitted) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tSTATUS\tCPG\tCONFIDENCE\tSOURCE\tREASONING")
	for _, r := range rows(jobs) {
		answer, conf, text := "-", "-", r.Reasoning
		if r.IsCPG != nil {
			answer = map[bool]string{true: "yes", false: "no"}[*r.IsCPG]
		}
		if r.Confidence != nil {
			conf = strconv.Itoa(*r.Confidence)
		}
		if r.Status == classifier.StatusFailed {
			text = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Domain, r.Status, answer, conf, cmpStr(string(r.Source), "-"), text)
	}
	return tw.Flush()
}

func printJSON(w io.Writer, jobs []*submitted) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows(jobs))
}

func printCSV(w io.Writer, jobs []*submitted) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"domain", "status", "is_cpg", "confidence", "source", "reasoning", "error", "job_id"})
	for _, r := range rows(jobs) {
		answer, conf := "", ""
		if r.IsCPG != nil {
			answer = strconv.FormatBool(*r.IsCPG)
		}
		if r.Confidence != nil {
			conf = strconv.Itoa(*r.Confidence)
		}
		_ = cw.Write([]string{r.Domain, string(r.Status), answer, conf, string(r.Source), r.Reasoning, r.Error, r.JobID})
	}
	cw.Flush()
	return cw.Error()
}

func printJobIDs(w io.Writer, what string, jobs []*submitted) {
	if len(jobs) == 0 {
		return
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	fmt.Fprintf(w, "%s: %s\n", what, strings.Join(ids, " "))
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

func problemDetail(body []byte) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Errors []struct {
			Input  string `json:"input"`
			Reason string `json:"reason"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &p) != nil || (p.Title == "" && p.Detail == "") {
		return strings.TrimSpace(fmt.Sprintf("%.200s", body))
	}
	msg := cmpStr(p.Detail, p.Title)
	for _, e := range p.Errors {
		msg += fmt.Sprintf("; %q: %s", e.Input, e.Reason)
	}
	return msg
}

func retryAfter(h http.Header, fallback time.Duration) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	return fallback
}

func unwrapURLError(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
