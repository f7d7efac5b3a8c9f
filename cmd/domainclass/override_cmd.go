package main

import (
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
func (c *cli) overrideCommands() []*cobra.Command {
	return []*cobra.Command{c.overrideSetCommand(), c.overrideListCommand(), c.overrideDeleteCommand(), c.overrideExportCommand()}
}

func (c *cli) overrideSetCommand() *cobra.Command {
	var (
		classifierName, note, by string
		yes, no                  bool
		confidence               int
	)
	cmd := &cobra.Command{
		Use:   "set DOMAIN --yes|--no --note TEXT [--confidence 5] [--by NAME]",
		Short: "record an operator's verdict on a domain: it answers before the cache and the model",
		Long: `Records your verdict on DOMAIN (normalized as the API does), replacing any
earlier override of it. From now on every job and list answers the domain
with it (source "override", reasoning "Set by NAME: NOTE", who and why in
set_by and note), ahead of the cache and the model, until it is deleted.
The model's answers are kept apart and never replace it. Rows answered
before keep what they got.`,
		Args: oneDomainArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			cls, domain, err := overrideTarget(classifierName, args[0])
			if err != nil {
				return err
			}
			if yes == no {
				return usagef("override set needs --yes or --no (one of them)")
			}
			if confidence < 1 || confidence > 5 {
				return usagef("--confidence must be 1 to 5, got %d", confidence)
			}
			// On one line, without control characters: the note is shown in
			// terminals, results and exports.
			if note = classifier.FoldLine(note); note == "" {
				return usagef("override set needs --note TEXT: why (it becomes the answer's reasoning)")
			}
			if by, err = c.operator(by); err != nil {
				return err
			}
			o := classifier.Override{Classifier: cls.Name, Domain: domain, Answer: yes, Confidence: confidence, Note: note, SetBy: by}
			return c.withDB(cmd, "override", func(d *db.DB, _ Config) error {
				_, updated, err := db.OverrideSet(cmd.Context(), d.Pool, []classifier.Override{o})
				if err != nil {
					return fmt.Errorf("error setting the override: %w", err)
				}
				replaced := ""
				if updated > 0 {
					replaced = " (replaces the earlier one)"
				}
				fmt.Fprintf(c.stdout, "override set: %s for %s is %s (confidence %d), by %s%s\n",
					domain, cls.Name, yesNo(o.Answer), o.Confidence, by, replaced)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&classifierName, "classifier", classifier.DefaultClassifier, "the classifier the verdict answers")
	f.BoolVar(&yes, "yes", false, "the answer is yes")
	f.BoolVar(&no, "no", false, "the answer is no")
	f.IntVar(&confidence, "confidence", 5, "how sure, 1 to 5")
	f.StringVar(&note, "note", "", "why, in one line (required; the answer's reasoning, and the rationale of an export)")
	f.StringVar(&by, "by", "", "who sets it (default: the user running the command, as the OS names it)")
	return cmd
}

func (c *cli) overrideListCommand() *cobra.Command {
	var classifierName string
	cmd := &cobra.Command{
		Use:   "list [--classifier NAME]",
		Short: "list the overrides: domain, answer, confidence, who set it, when, and why",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if classifierName != "" {
				if _, err := classifier.DefaultRegistry().Get(classifierName); err != nil {
					return &usageError{err.Error()}
				}
			}
			return c.withDB(cmd, "override", func(d *db.DB, _ Config) error {
				list, err := db.OverrideList(cmd.Context(), d.Pool, classifierName)
				if err != nil {
					return err
				}
				if len(list) == 0 {
					fmt.Fprintln(c.stdout, "no overrides; set one with: domainclass override set DOMAIN --yes|--no --note TEXT")
					return nil
				}
				tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CLASSIFIER\tDOMAIN\tANSWER\tCONFIDENCE\tSET BY\tSET AT\tNOTE")
				for _, o := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", o.Classifier, o.Domain, yesNo(o.Answer), o.Confidence,
						printable(o.SetBy), stamp(&o.SetAt), printable(o.Note))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&classifierName, "classifier", "", "only this classifier's overrides (default: every classifier's)")
	return cmd
}

func (c *cli) overrideDeleteCommand() *cobra.Command {
	var classifierName string
	cmd := &cobra.Command{
		Use:   "delete DOMAIN [--classifier NAME]",
		Short: "delete a domain's override: the cache and the model answer it again",
		Args:  oneDomainArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			cls, domain, err := overrideTarget(classifierName, args[0])
			if err != nil {
				return err
			}
			return c.withDB(cmd, "override", func(d *db.DB, _ Config) error {
				err := db.OverrideDelete(cmd.Context(), d.Pool, cls.Name, domain)
				if errors.Is(err, db.ErrNotFound) {
					return fmt.Errorf("%s has no override for %s", domain, cls.Name)
				} else if err != nil {
					return err
				}
				fmt.Fprintf(c.stdout, "override delete: %s for %s is answered by the cache and the model again\n", domain, cls.Name)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&classifierName, "classifier", classifier.DefaultClassifier, "the classifier of the override")
	return cmd
}

// overrideKind is the kind of an exported override in the evals data set:
// a case an operator had to correct.
const overrideKind = "override"

func (c *cli) overrideExportCommand() *cobra.Command {
	var (
		classifierName, kind string
		asCSV                bool
	)
	cmd := &cobra.Command{
		Use:   "export --csv [--classifier NAME] [--kind KIND]",
		Short: "write a classifier's overrides as eval cases (the evals data format), so corrections become test cases",
		Long: `Writes the overrides of one classifier to stdout as CSV in the evals data
format (evals/README.md): domain, the classifier's answer field (is_cpg),
doubtful (for a confidence of 3 or less), kind (--kind, default "override"),
rationale (the note) and split, left empty: append the rows to a data set
and run "domainclass eval split --data FILE" to give them one.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("csv") && !asCSV {
				return usagef("override export writes CSV only")
			}
			cls, err := classifier.DefaultRegistry().Get(classifierName)
			if err != nil {
				return &usageError{err.Error()}
			}
			if kind = strings.TrimSpace(kind); kind == "" {
				return usagef("--kind must name a kind")
			}
			return c.withDB(cmd, "override", func(d *db.DB, _ Config) error {
				list, err := db.OverrideList(cmd.Context(), d.Pool, cls.Name)
				if err != nil {
					return err
				}
				if len(list) == 0 {
					return fmt.Errorf("no overrides for %s to export", cls.Name)
				}
				// Cells escaped as every CSV for people is (csvcell): the
				// evals loader takes the escape off again.
				cw := csv.NewWriter(c.stdout)
				_ = cw.Write([]string{"domain", cls.AnswerField, "doubtful", "kind", "rationale", "split"})
				for _, o := range list {
					doubtful := ""
					if o.Confidence <= 3 {
						doubtful = "doubtful"
					}
					_ = cw.Write(csvcell.EscapeAll([]string{o.Domain, yesNo(o.Answer), doubtful, kind, o.Note, ""}))
				}
				cw.Flush()
				if err := cw.Error(); err != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "override export: %d %s for %s\n", len(list), evals.Plural(len(list), "override", "overrides"), cls.Name)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asCSV, "csv", true, "write CSV in the evals data format (the only format)")
	f.StringVar(&classifierName, "classifier", classifier.DefaultClassifier, "the classifier whose overrides to export")
	f.StringVar(&kind, "kind", overrideKind, "the kind of every row (evals/README.md lists the kinds)")
	return cmd
}

// oneDomainArg takes exactly one domain.
func oneDomainArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("%s takes 1 domain, got %d", cmd.CommandPath(), len(args))
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
func (c *cli) operator(by string) (string, error) {
	if by = classifier.FoldLine(by); by != "" {
		return by, nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if u := envMap(c.environ)["USER"]; u != "" {
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
