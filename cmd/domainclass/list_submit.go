package main

import (
	"bufio"
	"bytes"
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
func (c *cli) submitList(ctx context.Context, o submitOptions, args []string, src *source) error {
	contentType := client.ListText
	prefix := ""
	if len(args) > 0 {
		prefix = strings.Join(args, "\n") + "\n"
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(prefix)), nil }
	if src != nil {
		isCSV, err := src.isCSV()
		if err != nil {
			return err
		}
		if isCSV {
			if len(args) > 0 {
				return usagef("%s is a CSV file: add the domains given as arguments to it, or send them apart", src.name)
			}
			contentType = client.ListCSV
		} else if o.domainColumn != "" || o.refColumn != "" {
			return usagef("%s is not a CSV file (its first line has no comma): --domain-column and --ref-column name a CSV's columns", src.name)
		}
		open = func() (io.ReadCloser, error) {
			r, err := src.open()
			if err != nil {
				return nil, err
			}
			return readCloser{io.MultiReader(strings.NewReader(prefix), r), r}, nil
		}
	}

	api := c.apiClient(o.url, o.key)
	opts := client.ListOptions{Classifier: o.classifier, ContentType: contentType, Tier: o.tier,
		DomainColumn: o.domainColumn, RefColumn: o.refColumn}
	if o.dryRun {
		est, err := api.EstimateList(ctx, open, opts)
		if err != nil {
			return err
		}
		return printEstimate(c.stdout, est, o.asJSON)
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
		return err
	}
	fmt.Fprintf(c.stderr, "list %s: %d rows, %d domains, %d duplicates, %d rejected\n",
		a.ListID, a.Rows, a.Domains, a.Duplicates, a.Rejected)
	for _, r := range a.RejectedSample {
		fmt.Fprintf(c.stderr, "  row %d %q: %s\n", r.Row, r.Input, r.Reason)
	}
	if more := a.Rejected - len(a.RejectedSample); more > 0 {
		fmt.Fprintf(c.stderr, "  and %d more rejected rows (status REJECTED in the results)\n", more)
	}
	if !o.wait {
		fmt.Fprintf(c.stdout, "%s\t%s%s\n", a.ListID, api.BaseURL, a.StatusURL)
		return nil
	}

	if o.asJSON {
		fmt.Fprintln(c.stderr, "--json on a list is deprecated: it is --ndjson (one JSON object per row, as \"lists results --ndjson\")")
	}
	return c.waitList(ctx, api, a.ListID, waitOptions{out: o.out, ndjson: o.ndjson || o.asJSON, poll: o.poll})
}

// writeListResults writes a list's results to stdout, or into out (whole
// or not at all).
func (c *cli) writeListResults(ctx context.Context, api *client.Client, id, out string, opts client.ResultsOptions) error {
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

type readCloser struct {
	io.Reader
	io.Closer
}

// source is the --file input. A list upload reads it once per attempt, so
// stdin is kept: in memory up to stdinInMemory, in a temporary file beyond.
type source struct {
	name string // for messages: the path, or "stdin"
	path string // the file to read; "" when data holds the input
	data []byte
	temp bool // path is a temporary file, removed by Close
}

// stdinInMemory is how much of stdin is kept in memory; a longer input is
// spooled to a temporary file.
const stdinInMemory = 4 << 20

func (c *cli) openSource(name string) (*source, error) {
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", name, errors.Unwrap(err))
		}
		_ = f.Close()
		return &source{name: name, path: name}, nil
	}
	data, err := io.ReadAll(io.LimitReader(c.stdin, stdinInMemory+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read stdin: %w", err)
	}
	if len(data) <= stdinInMemory {
		return &source{name: "stdin", data: data}, nil
	}
	f, err := os.CreateTemp("", "domainclass-stdin-*")
	if err != nil {
		return nil, fmt.Errorf("cannot keep stdin in a temporary file: %w", err)
	}
	s := &source{name: "stdin", path: f.Name(), temp: true}
	_, err = io.Copy(f, io.MultiReader(bytes.NewReader(data), c.stdin))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cannot keep stdin in a temporary file: %w", err)
	}
	return s, nil
}

// open returns the input from its start.
func (s *source) open() (io.ReadCloser, error) {
	if s.path == "" {
		return io.NopCloser(bytes.NewReader(s.data)), nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", s.name, errors.Unwrap(err))
	}
	return f, nil
}

// isCSV reports whether the input is a CSV (its first line has a comma).
func (s *source) isCSV() (bool, error) {
	r, err := s.open()
	if err != nil {
		return false, err
	}
	defer r.Close()
	return firstLineHasComma(bufio.NewReader(r))
}

// domains reads every input (see scanDomainList).
func (s *source) domains() ([]string, error) {
	r, err := s.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readDomainList(r)
}

// Close removes a temporary file.
func (s *source) Close() {
	if s.temp {
		_ = os.Remove(s.path)
	}
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
		{"overridden", est.Overridden}, {"cached", est.Cached}, {"fresh", est.Fresh}, {"model calls", est.ModelCalls},
		{"model", model},
		{"standard", cost(standard) + ", " + about(time.Duration(standard.EstimatedSeconds*float64(time.Second))) + mark[classifier.TierStandard]},
		{"economy", cost(economy) + ", within 24 hours (Batch API)" + mark[classifier.TierEconomy]},
	} {
		fmt.Fprintf(tw, "%s\t%v\n", line[0], line[1])
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

// listProgress shows how far a list is (progressLine).
type listProgress struct{ *progressLine }

func newListProgress(w io.Writer) *listProgress {
	return &listProgress{newProgressLine(w, "rows")}
}

// set shows one poll's status.
func (p *listProgress) set(s *wire.ListStatus) {
	p.progressLine.set(s.Progress.Done, s.Progress.Total, "")
}
