package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/evals"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// reviewCommands are `review rules|export` (issue 39): what fills the
// review queues, and the reviewed answers as eval cases.
func (c *base) reviewCommands() []*cobra.Command {
	return []*cobra.Command{c.reviewRulesCommand(), c.reviewExportCommand()}
}

// reviewRules is `review rules`.
type reviewRules struct {
	*base
	invocation
	classifierName, by string
	lowConfidence      int
	auditRate          float64
}

func (c *base) reviewRulesCommand() *cobra.Command {
	o := &reviewRules{base: c}
	cmd := &cobra.Command{
		Use:   "rules [--classifier NAME] [--low-confidence N] [--audit-rate F]",
		Short: "show, or change, what fills each classifier's review queue",
		Long: `Shows the review rules of every classifier (or of --classifier), and with
--low-confidence or --audit-rate changes those of --classifier (default cpg).
Answers the model gives from then on are queued when their confidence is at
or below --low-confidence (0: none; default 3), and --audit-rate of the
others (default 0.01) as the audit sample that measures the model's
accuracy without bias (drawn by a hash of the answer). Answers that changed
on refresh and answers a caller disputed are always queued.`,
	}
	f := cmd.Flags()
	f.StringVar(&o.classifierName, "classifier", "", "the classifier (default: every classifier's rules are shown; cpg's are changed)")
	f.IntVar(&o.lowConfidence, "low-confidence", classifier.DefaultReviewLowConfidence, "queue answers with a confidence at or below this, 0 to 5")
	f.Float64Var(&o.auditRate, "audit-rate", classifier.DefaultReviewAuditRate, "the share of the other answers queued as the audit sample, 0 to 1")
	f.StringVar(&o.by, "by", "", "who changes them (default: the user running the command, as the OS names it)")
	return command(cmd, o)
}

func (o *reviewRules) Validate() error {
	if err := o.noArgs(); err != nil {
		return err
	}
	if o.classifierName != "" {
		if _, err := classifier.DefaultRegistry().Get(o.classifierName); err != nil {
			return &usageError{err.Error()}
		}
	}
	if o.lowConfidence < 0 || o.lowConfidence > 5 {
		return usagef("--low-confidence must be 0 to 5, got %d", o.lowConfidence)
	}
	if o.auditRate < 0 || o.auditRate > 1 || o.auditRate != o.auditRate {
		return usagef("--audit-rate must be 0 to 1 (0.01 is 1%%), got %v", o.auditRate)
	}
	return nil
}

func (o *reviewRules) Run(ctx context.Context) error {
	change := o.given("low-confidence") || o.given("audit-rate")
	names := classifier.DefaultRegistry().Names()
	if o.classifierName != "" {
		names = []string{o.classifierName}
	}
	return o.withDB(ctx, "review", func(d *db.DB, _ Deployment) error {
		if change {
			name := o.classifierName
			if name == "" {
				name = classifier.DefaultClassifier
			}
			current, err := db.ReviewRulesGet(ctx, d.Pool, []string{name})
			if err != nil {
				return err
			}
			r := current[0]
			if o.given("low-confidence") {
				r.LowConfidence = o.lowConfidence
			}
			if o.given("audit-rate") {
				r.AuditRate = o.auditRate
			}
			if r.UpdatedBy, err = o.operator(o.by); err != nil {
				return err
			}
			if err := db.ReviewRulesSet(ctx, d.Pool, r); err != nil {
				return fmt.Errorf("error setting the review rules: %w", err)
			}
			fmt.Fprintf(o.stdout, "review rules: %s now queues answers of confidence ≤ %d and %s of the others as the audit sample\n",
				name, r.LowConfidence, strconv.FormatFloat(r.AuditRate*100, 'f', -1, 64)+"%")
			names = []string{name}
		}
		rules, err := db.ReviewRulesGet(ctx, d.Pool, names)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLASSIFIER\tLOW CONFIDENCE\tAUDIT RATE\tCHANGED BY\tCHANGED AT")
		for _, r := range rules {
			by, at := "(defaults)", ""
			if r.UpdatedBy != "" {
				by, at = printable(r.UpdatedBy), stamp(&r.UpdatedAt)
			}
			fmt.Fprintf(tw, "%s\t≤ %d\t%s\t%s\t%s\n", r.Classifier, r.LowConfidence, strconv.FormatFloat(r.AuditRate, 'f', -1, 64), by, at)
		}
		return tw.Flush()
	})
}

// reviewKind is the kind of an exported reviewed answer in the evals data
// set: a case a reviewer judged.
const reviewKind = "review"

// reviewExport is `review export`.
type reviewExport struct {
	*base
	invocation
	classifierName, out string
}

func (c *base) reviewExportCommand() *cobra.Command {
	o := &reviewExport{base: c}
	cmd := &cobra.Command{
		Use:   "export [--classifier NAME] [--out FILE]",
		Short: "write the reviewed answers as eval cases (the evals data format), split by hash as the set's own rows",
		Long: `Writes the reviewers' verdicts on a classifier's answers (the latest on each
domain) as CSV in the evals data format (evals/README.md): domain, the
classifier's answer field (is_cpg: the reviewer's verdict), doubtful
(empty), kind "review", rationale (the reviewer's note, or who reviewed it
and when) and split, dev or test by the data sets' own hash rule
(domainclass eval split), so that "domainclass eval --data FILE" scores
candidate prompts on what production got wrong.

With --out FILE, rows already in FILE keep their split (and their row):
only domains new to it are added, and split by the same rule, so a row
never moves from dev to test. Without it, the CSV goes to stdout.`,
	}
	f := cmd.Flags()
	f.StringVar(&o.classifierName, "classifier", classifier.DefaultClassifier, "the classifier whose reviewed answers to export")
	f.StringVar(&o.out, "out", "", "the data set to write or add to (default: stdout)")
	return command(cmd, o)
}

func (o *reviewExport) Validate() error {
	if err := o.noArgs(); err != nil {
		return err
	}
	if _, err := classifier.DefaultRegistry().Get(o.classifierName); err != nil {
		return &usageError{err.Error()}
	}
	return nil
}

func (o *reviewExport) Run(ctx context.Context) error {
	cls, err := classifier.DefaultRegistry().Get(o.classifierName)
	if err != nil {
		return err
	}
	// The data set already there keeps its rows and their splits.
	var cases []evals.Case
	known := map[string]bool{}
	if o.out != "" {
		raw, err := os.ReadFile(o.out)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("cannot read %s: %w", o.out, err)
		default:
			if cases, err = evals.ReadCases(bytes.NewReader(raw), cls.AnswerField); err != nil {
				return fmt.Errorf("%s: %w", o.out, err)
			}
			for _, c := range cases {
				known[c.Domain] = true
			}
		}
	}
	return o.withDB(ctx, "review", func(d *db.DB, _ Deployment) error {
		reviewed, err := db.ReviewReviewed(ctx, d.Pool, cls.Name)
		if err != nil {
			return err
		}
		added := 0
		for _, it := range reviewed {
			if known[it.Domain] {
				continue
			}
			rationale := it.Note
			if rationale == "" || rationale == "Reviewed: yes." || rationale == "Reviewed: no." {
				rationale = fmt.Sprintf("Reviewed by %s on %s.", it.Reviewer, it.ReviewedAt.UTC().Format("2006-01-02"))
			}
			cases = append(cases, evals.Case{Domain: it.Domain, Label: *it.Verdict, Kind: reviewKind, Rationale: rationale})
			added++
		}
		if len(cases) == 0 {
			return fmt.Errorf("no reviewed answers of %s to export", cls.Name)
		}
		evals.AssignSplits(cases)
		var buf bytes.Buffer
		if err := writeCases(&buf, cls.AnswerField, cases); err != nil {
			return err
		}
		if o.out == "" {
			_, err = o.stdout.Write(buf.Bytes())
		} else {
			err = writeFileAtomic(o.out, buf.Bytes())
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(o.stderr, "review export: %d reviewed %s of %s added, %d rows in all\n",
			added, evals.Plural(added, "answer", "answers"), cls.Name, len(cases))
		return nil
	})
}

// writeCases writes cases in the evals data format, cells escaped as every
// CSV for people is (csvcell): the evals loader takes the escape off.
func writeCases(w io.Writer, answerField string, cases []evals.Case) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"domain", answerField, "doubtful", "kind", "rationale", "split"})
	for _, c := range cases {
		doubtful := ""
		if c.Doubtful {
			doubtful = "doubtful"
		}
		_ = cw.Write(csvcell.EscapeAll([]string{c.Domain, yesNo(c.Label), doubtful, c.Kind, c.Rationale, c.Split}))
	}
	cw.Flush()
	return cw.Error()
}

// writeFileAtomic replaces path with data: written beside it, then renamed,
// so that a failure leaves the data set as it was.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
