package cli

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/evals"
	"github.com/domainclass/domainclass/wire/csvcell"
)

// overrideCommands are `override set|list|delete|export`: operators'
// verdicts on domains, which answer before the cache and the model.
func (c *base) overrideCommands() []*cobra.Command {
	return []*cobra.Command{c.overrideSetCommand(), c.overrideListCommand(), c.overrideDeleteCommand(), c.overrideExportCommand()}
}

// overrideSet is `override set`.
type overrideSet struct {
	*base
	invocation
	classifierName, note, by string
	yes, no                  bool
	confidence               int
}

func (c *base) overrideSetCommand() *cobra.Command {
	o := &overrideSet{base: c}
	cmd := &cobra.Command{
		Use:   "set DOMAIN --yes|--no --note TEXT [--confidence 5] [--by NAME]",
		Short: "record an operator's verdict on a domain: it answers before the cache and the model",
		Long: `Records your verdict on DOMAIN (normalized as the API does), replacing any
earlier override of it. From now on every job and list answers the domain
with it (source "override", reasoning "Set by NAME: NOTE", who and why in
set_by and note), ahead of the cache and the model, until it is deleted.
The model's answers are kept apart and never replace it. Rows answered
before keep what they got.`,
	}
	f := cmd.Flags()
	f.StringVar(&o.classifierName, "classifier", classifier.DefaultClassifier, "the classifier the verdict answers")
	f.BoolVar(&o.yes, "yes", false, "the answer is yes")
	f.BoolVar(&o.no, "no", false, "the answer is no")
	f.IntVar(&o.confidence, "confidence", 5, "how sure, 1 to 5")
	f.StringVar(&o.note, "note", "", "why, in one line (required; the answer's reasoning, and the rationale of an export)")
	f.StringVar(&o.by, "by", "", "who sets it (default: the user running the command, as the OS names it)")
	return command(cmd, o)
}

func (o *overrideSet) Validate() error {
	if err := o.oneDomainArg(); err != nil {
		return err
	}
	if _, _, err := overrideTarget(o.classifierName, o.args[0]); err != nil {
		return err
	}
	if o.yes == o.no {
		return usagef("override set needs --yes or --no (one of them)")
	}
	if o.confidence < 1 || o.confidence > 5 {
		return usagef("--confidence must be 1 to 5, got %d", o.confidence)
	}
	// On one line, without control characters: the note is shown in
	// terminals, results and exports.
	if classifier.FoldLine(o.note) == "" {
		return usagef("override set needs --note TEXT: why (it becomes the answer's reasoning)")
	}
	return nil
}

func (o *overrideSet) Run(ctx context.Context) error {
	cls, domain, err := overrideTarget(o.classifierName, o.args[0])
	if err != nil {
		return err
	}
	by, err := o.operator(o.by)
	if err != nil {
		return err
	}
	v := classifier.Override{Classifier: cls.Name, Domain: domain, Answer: o.yes, Confidence: o.confidence,
		Note: classifier.FoldLine(o.note), SetBy: by}
	return o.withDB(ctx, "override", func(d *db.DB, _ Deployment) error {
		_, updated, err := db.OverrideSet(ctx, d.Pool, []classifier.Override{v})
		if err != nil {
			return fmt.Errorf("error setting the override: %w", err)
		}
		replaced := ""
		if updated > 0 {
			replaced = " (replaces the earlier one)"
		}
		fmt.Fprintf(o.stdout, "override set: %s for %s is %s (confidence %d), by %s%s\n",
			domain, cls.Name, yesNo(v.Answer), v.Confidence, by, replaced)
		return nil
	})
}

// overrideList is `override list`.
type overrideList struct {
	*base
	invocation
	classifierName string
}

func (c *base) overrideListCommand() *cobra.Command {
	o := &overrideList{base: c}
	cmd := &cobra.Command{
		Use:   "list [--classifier NAME]",
		Short: "list the overrides: domain, answer, confidence, who set it, when, and why",
	}
	cmd.Flags().StringVar(&o.classifierName, "classifier", "", "only this classifier's overrides (default: every classifier's)")
	return command(cmd, o)
}

func (o *overrideList) Validate() error {
	if err := o.noArgs(); err != nil {
		return err
	}
	if o.classifierName != "" {
		if _, err := classifier.DefaultRegistry().Get(o.classifierName); err != nil {
			return &usageError{err.Error()}
		}
	}
	return nil
}

func (o *overrideList) Run(ctx context.Context) error {
	return o.withDB(ctx, "override", func(d *db.DB, _ Deployment) error {
		list, err := db.OverrideList(ctx, d.Pool, o.classifierName)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(o.stdout, "no overrides; set one with: domainclass override set DOMAIN --yes|--no --note TEXT")
			return nil
		}
		tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLASSIFIER\tDOMAIN\tANSWER\tCONFIDENCE\tSET BY\tSET AT\tNOTE")
		for _, v := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.Classifier, v.Domain, yesNo(v.Answer), v.Confidence,
				printable(v.SetBy), stamp(&v.SetAt), printable(v.Note))
		}
		return tw.Flush()
	})
}

// overrideDelete is `override delete`.
type overrideDelete struct {
	*base
	invocation
	classifierName string
}

func (c *base) overrideDeleteCommand() *cobra.Command {
	o := &overrideDelete{base: c}
	cmd := &cobra.Command{
		Use:   "delete DOMAIN [--classifier NAME]",
		Short: "delete a domain's override: the cache and the model answer it again",
	}
	cmd.Flags().StringVar(&o.classifierName, "classifier", classifier.DefaultClassifier, "the classifier of the override")
	return command(cmd, o)
}

func (o *overrideDelete) Validate() error {
	if err := o.oneDomainArg(); err != nil {
		return err
	}
	_, _, err := overrideTarget(o.classifierName, o.args[0])
	return err
}

func (o *overrideDelete) Run(ctx context.Context) error {
	cls, domain, err := overrideTarget(o.classifierName, o.args[0])
	if err != nil {
		return err
	}
	return o.withDB(ctx, "override", func(d *db.DB, _ Deployment) error {
		err := db.OverrideDelete(ctx, d.Pool, cls.Name, domain)
		if errors.Is(err, db.ErrNotFound) {
			return fmt.Errorf("%s has no override for %s", domain, cls.Name)
		} else if err != nil {
			return err
		}
		fmt.Fprintf(o.stdout, "override delete: %s for %s is answered by the cache and the model again\n", domain, cls.Name)
		return nil
	})
}

// overrideKind is the kind of an exported override in the evals data set:
// a case an operator had to correct.
const overrideKind = "override"

// overrideExport is `override export`.
type overrideExport struct {
	*base
	invocation
	classifierName, kind string
	asCSV                bool
}

func (c *base) overrideExportCommand() *cobra.Command {
	o := &overrideExport{base: c}
	cmd := &cobra.Command{
		Use:   "export --csv [--classifier NAME] [--kind KIND]",
		Short: "write a classifier's overrides as eval cases (the evals data format), so corrections become test cases",
		Long: `Writes the overrides of one classifier to stdout as CSV in the evals data
format (evals/README.md): domain, the classifier's answer field (is_cpg),
doubtful (for a confidence of 3 or less), kind (--kind, default "override"),
rationale (the note) and split, left empty: append the rows to a data set
and run "domainclass eval split --data FILE" to give them one.`,
	}
	f := cmd.Flags()
	f.BoolVar(&o.asCSV, "csv", true, "write CSV in the evals data format (the only format)")
	f.StringVar(&o.classifierName, "classifier", classifier.DefaultClassifier, "the classifier whose overrides to export")
	f.StringVar(&o.kind, "kind", overrideKind, "the kind of every row (evals/README.md lists the kinds)")
	return command(cmd, o)
}

func (o *overrideExport) Validate() error {
	if err := o.noArgs(); err != nil {
		return err
	}
	if o.given("csv") && !o.asCSV {
		return usagef("override export writes CSV only")
	}
	if _, err := classifier.DefaultRegistry().Get(o.classifierName); err != nil {
		return &usageError{err.Error()}
	}
	if strings.TrimSpace(o.kind) == "" {
		return usagef("--kind must name a kind")
	}
	return nil
}

func (o *overrideExport) Run(ctx context.Context) error {
	cls, err := classifier.DefaultRegistry().Get(o.classifierName)
	if err != nil {
		return err
	}
	kind := strings.TrimSpace(o.kind)
	return o.withDB(ctx, "override", func(d *db.DB, _ Deployment) error {
		list, err := db.OverrideList(ctx, d.Pool, cls.Name)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("no overrides for %s to export", cls.Name)
		}
		// Cells escaped as every CSV for people is (csvcell): the evals
		// loader takes the escape off again.
		cw := csv.NewWriter(o.stdout)
		_ = cw.Write([]string{"domain", cls.AnswerField, "doubtful", "kind", "rationale", "split"})
		for _, v := range list {
			doubtful := ""
			if v.Confidence <= 3 {
				doubtful = "doubtful"
			}
			_ = cw.Write(csvcell.EscapeAll([]string{v.Domain, yesNo(v.Answer), doubtful, kind, v.Note, ""}))
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		fmt.Fprintf(o.stderr, "override export: %d %s for %s\n", len(list), evals.Plural(len(list), "override", "overrides"), cls.Name)
		return nil
	})
}

// oneDomainArg takes exactly one domain.
func (i *invocation) oneDomainArg() error {
	if len(i.args) != 1 {
		return usagef("%s takes 1 domain, got %d", i.path(), len(i.args))
	}
	return nil
}

// overrideTarget is the classifier named and the domain as the API
// normalizes it; either wrong is a usage error.
func overrideTarget(classifierName, input string) (*classifier.Classifier, string, error) {
	cls, err := classifier.DefaultRegistry().Get(classifierName)
	if err != nil {
		return nil, "", &usageError{err.Error()}
	}
	domain, err := classifier.NormalizeDomain(input)
	if err != nil {
		return nil, "", &usageError{err.Error()}
	}
	return cls, domain, nil
}

// operator is who sets an override: by when given, else the user running
// the command (as the OS names it, or $USER).
func (c *base) operator(by string) (string, error) {
	if by = classifier.FoldLine(by); by != "" {
		return by, nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if u := getenv(c.environ, "USER"); u != "" {
		return u, nil
	}
	return "", usagef("cannot tell who you are: say it with --by NAME")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
