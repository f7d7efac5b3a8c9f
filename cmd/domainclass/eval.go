package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/evals"
)

// evalOptions are the flags of `domainclass eval`.
type evalOptions struct {
	data, classifier, models, prompts, searches, cacheDir, out, prices string
	split                                                              string
	repeat, concurrency, rate, maxFN, maxFailed                        int
	noCache                                                            bool
	minAccuracy                                                        float64
}

func (c *cli) evalCommand() *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval --data FILE.csv [flags]",
		Short: "score models and prompt versions on labelled domains (see docs/evals.md)",
		Long: `Runs every candidate (model × prompt version × search provider) over a labelled
data set through the worker's own search and model step, against the
OPENAI_BASE_URL / OPENAI_API_KEY endpoint, and writes a Markdown and JSON report
with pictures to --out. With a gate flag it exits 1 when a candidate falls short.`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) > 0:
				return usagef("eval takes no arguments, got %q", strings.Join(args, " "))
			case o.data == "":
				return usagef("eval needs --data FILE.csv (for example evals/cpg.csv)")
			case o.repeat < 1:
				return usagef("--repeat must be at least 1")
			case o.concurrency < 0 || o.rate < 0:
				return usagef("--concurrency and --rate must be positive")
			case o.minAccuracy < 0 || o.minAccuracy > 1:
				return usagef("--min-accuracy must be between 0 and 1")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return c.eval(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", "", "labelled data set (CSV: domain, the classifier's answer field such as is_cpg, doubtful, kind, rationale); see evals/README.md")
	f.StringVar(&o.classifier, "classifier", classifier.DefaultClassifier, "the classifier to evaluate")
	f.StringVar(&o.split, "split", "all", "the rows to run: dev (tune prompts on these), test (held out) or all")
	f.StringVar(&o.models, "models", "", "comma-separated model names (default OPENAI_MODEL)")
	f.StringVar(&o.prompts, "prompts", "", "comma-separated prompt versions (default the classifier's current prompt)")
	f.StringVar(&o.searches, "search", "", "comma-separated search providers: none, homepage, brave (default SEARCH_PROVIDER)")
	f.IntVar(&o.repeat, "repeat", 1, "ask about every domain N times, to measure how often answers flip")
	f.IntVar(&o.concurrency, "concurrency", 0, "answers in flight at once (default LLM_MAX_CONCURRENCY)")
	f.IntVar(&o.rate, "rate", 0, "model calls started per minute at most (default LLM_RATE_PER_MINUTE)")
	f.StringVar(&o.cacheDir, "cache", "evals/.cache", "folder of cached model responses and search evidence")
	f.BoolVar(&o.noCache, "no-cache", false, "ask the model and search again for everything, and keep nothing")
	f.StringVar(&o.out, "out", "evals/report", "folder for report.md, report.json and the pictures")
	f.StringVar(&o.prices, "prices", "", "YAML price table to put before the built-in one (evals/prices.yaml)")
	f.IntVar(&o.maxFN, "max-fn", -1, "gate: most false negatives allowed per candidate (-1: no limit)")
	f.Float64Var(&o.minAccuracy, "min-accuracy", 0, "gate: lowest accuracy allowed per candidate, 0 to 1 (0: no limit)")
	f.IntVar(&o.maxFailed, "max-failed", -1, "gate: most FAILED answers allowed per candidate (-1: no limit)")
	cmd.AddCommand(c.evalSplitCommand())
	return cmd
}

// eval is `domainclass eval`: wiring only; the work is in package evals.
func (c *cli) eval(ctx context.Context, o evalOptions) error {
	cls, err := classifier.DefaultRegistry().Get(o.classifier)
	if err != nil {
		return &usageError{err.Error()}
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	modelList := splitList(o.models, cfg.OpenAIModel)
	promptList := splitList(o.prompts, cls.CurrentPrompt)
	searchList := splitList(o.searches, cfg.SearchProvider)
	for _, v := range promptList {
		if _, err := cls.Prompt(v); err != nil {
			return &usageError{err.Error()}
		}
	}
	for _, s := range searchList {
		if !slices.Contains([]string{search.ProviderNone, search.ProviderHomepage, search.ProviderBrave}, s) {
			return usagef("unknown search provider %q (want none, homepage or brave)", s)
		}
	}
	if cfg.OpenAIAPIKey == "" {
		return errors.New("eval needs a model: set OPENAI_API_KEY (any value for a local server) and, for a server other than OpenAI, OPENAI_BASE_URL")
	}

	cases, err := evals.LoadCases(o.data, cls.AnswerField)
	if err == nil {
		cases, err = evals.SplitCases(cases, o.split)
	}
	if err != nil {
		return err
	}
	prices := evals.DefaultPrices()
	if o.prices != "" {
		if prices, err = evals.LoadPrices(o.prices); err != nil {
			return err
		}
	}
	concurrency, rate := cmp.Or(o.concurrency, cfg.LLMMaxConcurrency), cmp.Or(o.rate, cfg.LLMRatePerMinute)
	client, err := cfg.newLLMClient(nil, nil)
	if err != nil {
		return err
	}
	searchers := map[string]classifier.Searcher{}
	for _, name := range searchList {
		if searchers[name], err = cfg.newSearcher(name); err != nil {
			return err
		}
	}
	var cache *evals.Cache
	if !o.noCache {
		if cache, err = evals.OpenCache(o.cacheDir); err != nil {
			return err
		}
	}

	candidates := evals.Candidates(modelList, promptList, searchList)
	progress := evals.NewProgress(c.stderr, len(candidates)*len(cases)*o.repeat, isTerminal(c.stderr))
	res, err := evals.Run(ctx, evals.Config{
		Classifier: cls, Cases: cases, Candidates: candidates, Repeat: o.repeat, Concurrency: concurrency,
		LLM: llm.Limit(client, concurrency, rate, nil), Searchers: searchers, Cache: cache,
		OnAnswer: progress.Add, Logger: cfg.NewLogger(c.stderr),
	})
	if err != nil {
		return fmt.Errorf("eval stopped: %w", err)
	}
	gate := evals.Gate{MaxFN: o.maxFN, MinAccuracy: o.minAccuracy, MaxFailed: o.maxFailed}
	report := evals.NewReport(o.data, res, evals.ScoreAll(res, prices), gate)
	path, err := report.Write(o.out)
	if err != nil {
		return err
	}

	yes, no, doubtful := evals.Balance(cases)
	fmt.Fprintf(c.stdout, "%d domains (%d yes, %d no, %d doubtful) × %d %s × %d:\n\n",
		len(cases), yes, no, doubtful, len(candidates), evals.Plural(len(candidates), "candidate", "candidates"), o.repeat)
	fmt.Fprint(c.stdout, evals.SummaryTable(report.Scores, report.GateFailures))
	fmt.Fprintf(c.stdout, "\nreport: %s\n", path)
	if len(report.GateFailures) == 0 {
		return nil
	}
	for _, s := range report.Scores {
		if why := report.GateFailures[s.Name]; len(why) > 0 {
			fmt.Fprintf(c.stderr, "eval gate: %s: %s\n", s.Name, strings.Join(why, "; "))
		}
	}
	return fmt.Errorf("eval gate failed: %d of %d candidates fell short (%s)", len(report.GateFailures), len(candidates), gate)
}

// splitList splits a comma-separated flag, or returns def for an empty one.
func splitList(s, def string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return []string{def}
	}
	return out
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// evalSplitCommand is `domainclass eval split`: it fills a data set's split
// column (dev or test) for the rows that have none, by the fixed rule of
// evals.AssignSplits.
func (c *cli) evalSplitCommand() *cobra.Command {
	var data, cls string
	cmd := &cobra.Command{
		Use:   "split --data FILE.csv",
		Short: "give the rows of a data set without a split one (dev or test), stratified by kind, by a fixed rule",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 || data == "" {
				return usagef("eval split takes --data FILE.csv and no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := classifier.DefaultRegistry().Get(cls)
			if err != nil {
				return err
			}
			n, err := evals.AssignSplitsFile(data, cl.AnswerField)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "%s: %d %s given a split\n", data, n, evals.Plural(n, "row", "rows"))
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the data set (CSV) to fill")
	cmd.Flags().StringVar(&cls, "classifier", classifier.DefaultClassifier, "the classifier whose answer column the data set has")
	return cmd
}
