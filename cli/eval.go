package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/evals"
)

// evalOptions are the flags of `domainclass eval`.
type evalOptions struct {
	*base
	invocation
	data, classifier, models, prompts, searches, cacheDir, out, prices string
	split                                                              string
	repeat, concurrency, rate, maxFN, maxFailed                        int
	noCache                                                            bool
	minAccuracy                                                        float64
}

func (c *base) evalCommand() *cobra.Command {
	o := &evalOptions{base: c}
	cmd := &cobra.Command{
		Use:   "eval --data FILE.csv [flags]",
		Short: "score models and prompt versions on labelled domains (see docs/evals.md)",
		Long: `Runs every candidate (model × prompt version × search provider) over a labelled
data set through the worker's own search and model step, against the
OPENAI_BASE_URL / OPENAI_API_KEY endpoint, and writes a Markdown and JSON report
with pictures to --out. With a gate flag it exits 1 when a candidate falls short.`,
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
	f.StringVar(&o.prices, "prices", "", "YAML price table to put before the built-in one (classifier/llm/prices.yaml)")
	f.IntVar(&o.maxFN, "max-fn", -1, "gate: most false negatives allowed per candidate (-1: no limit)")
	f.Float64Var(&o.minAccuracy, "min-accuracy", 0, "gate: lowest accuracy allowed per candidate, 0 to 1 (0: no limit)")
	f.IntVar(&o.maxFailed, "max-failed", -1, "gate: most FAILED answers allowed per candidate (-1: no limit)")
	cmd.AddCommand(c.evalSplitCommand())
	return command(cmd, o)
}

func (o *evalOptions) Validate() error {
	switch {
	case len(o.args) > 0:
		return usagef("eval takes no arguments, got %q", strings.Join(o.args, " "))
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
}

// evalRun is what one eval runs: the classifier, the candidates, the
// cases and the providers, read from the flags and the deployment.
type evalRun struct {
	cls        *classifier.Classifier
	logger     *slog.Logger
	models     Models
	model      classifier.Completer
	candidates []evals.Candidate
	cases      []evals.Case
	prices     llm.Prices
	searchers  map[string]classifier.Searcher
	cache      *evals.Cache
}

// Run is `domainclass eval`: wiring only; the work is in package evals.
func (o *evalOptions) Run(ctx context.Context) error {
	r, err := o.prepare()
	if err != nil {
		return err
	}
	concurrency, rate := cmp.Or(o.concurrency, r.models.Concurrency), cmp.Or(o.rate, r.models.RatePerMinute)
	progress := evals.NewProgress(o.stderr, len(r.candidates)*len(r.cases)*o.repeat, isTerminal(o.stderr))
	res, err := evals.Run(ctx, evals.Config{
		Classifier: r.cls, Cases: r.cases, Candidates: r.candidates, Repeat: o.repeat, Concurrency: concurrency,
		LLM: llm.Limit(r.model, concurrency, rate, nil), Searchers: r.searchers, Cache: r.cache,
		OnAnswer: progress.Add, Logger: r.logger,
	})
	if err != nil {
		return fmt.Errorf("eval stopped: %w", err)
	}
	return o.report(r, res)
}

// prepare checks the flags against the registry and the deployment, and
// reads the data set, the prices, the providers and the cache.
func (o *evalOptions) prepare() (*evalRun, error) {
	cls, err := classifier.DefaultRegistry().Get(o.classifier)
	if err != nil {
		return nil, &usageError{err.Error()}
	}
	dep, err := o.deployment()
	if err != nil {
		return nil, err
	}
	r := &evalRun{cls: cls, models: dep.Models(), logger: dep.Logger(o.stderr)}
	promptList := splitList(o.prompts, cls.CurrentPrompt)
	searchList := splitList(o.searches, r.models.Search)
	for _, v := range promptList {
		if _, err := cls.Prompt(v); err != nil {
			return nil, &usageError{err.Error()}
		}
	}
	for _, s := range searchList {
		if !slices.Contains([]string{search.ProviderNone, search.ProviderHomepage, search.ProviderBrave}, s) {
			return nil, usagef("unknown search provider %q (want none, homepage or brave)", s)
		}
	}
	if !r.models.Configured {
		return nil, errors.New("eval needs a model: set OPENAI_API_KEY (any value for a local server) and, for a server other than OpenAI, OPENAI_BASE_URL")
	}
	r.candidates = evals.Candidates(splitList(o.models, r.models.Model), promptList, searchList)
	if err := o.read(r, searchList); err != nil {
		return nil, err
	}
	return r, nil
}

// read loads the data set, the prices, the model, the search providers
// and the cache.
func (o *evalOptions) read(r *evalRun, searchList []string) error {
	cases, err := evals.LoadCases(o.data, r.cls.AnswerField)
	if err == nil {
		cases, err = evals.SplitCases(cases, o.split)
	}
	if err != nil {
		return err
	}
	r.cases, r.prices = cases, llm.DefaultPrices()
	if o.prices != "" {
		if r.prices, err = llm.LoadPrices(o.prices); err != nil {
			return err
		}
	}
	if r.model, err = r.models.NewModel(); err != nil {
		return err
	}
	r.searchers = map[string]classifier.Searcher{}
	for _, name := range searchList {
		if r.searchers[name], err = r.models.NewSearcher(name); err != nil {
			return err
		}
	}
	if !o.noCache {
		if r.cache, err = evals.OpenCache(o.cacheDir); err != nil {
			return err
		}
	}
	return nil
}

// report writes the report, prints its summary, and fails when a
// candidate fell short of a gate.
func (o *evalOptions) report(r *evalRun, res *evals.Results) error {
	gate := evals.Gate{MaxFN: o.maxFN, MinAccuracy: o.minAccuracy, MaxFailed: o.maxFailed}
	report := evals.NewReport(o.data, res, evals.ScoreAll(res, r.prices), gate)
	path, err := report.Write(o.out)
	if err != nil {
		return err
	}
	yes, no, doubtful := evals.Balance(r.cases)
	fmt.Fprintf(o.stdout, "%d domains (%d yes, %d no, %d doubtful) × %d %s × %d:\n\n",
		len(r.cases), yes, no, doubtful, len(r.candidates), evals.Plural(len(r.candidates), "candidate", "candidates"), o.repeat)
	fmt.Fprint(o.stdout, evals.SummaryTable(report.Scores, report.GateFailures))
	fmt.Fprintf(o.stdout, "\nreport: %s\n", path)
	if len(report.GateFailures) == 0 {
		return nil
	}
	for _, s := range report.Scores {
		if why := report.GateFailures[s.Name]; len(why) > 0 {
			fmt.Fprintf(o.stderr, "eval gate: %s: %s\n", s.Name, strings.Join(why, "; "))
		}
	}
	return fmt.Errorf("eval gate failed: %d of %d candidates fell short (%s)", len(report.GateFailures), len(r.candidates), gate)
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

// evalSplit is `domainclass eval split`: it fills a data set's split
// column (dev or test) for the rows that have none, by the fixed rule of
// evals.AssignSplits.
type evalSplit struct {
	*base
	invocation
	data, classifier string
}

func (c *base) evalSplitCommand() *cobra.Command {
	o := &evalSplit{base: c}
	cmd := &cobra.Command{
		Use:   "split --data FILE.csv",
		Short: "give the rows of a data set without a split one (dev or test), stratified by kind, by a fixed rule",
	}
	cmd.Flags().StringVar(&o.data, "data", "", "the data set (CSV) to fill")
	cmd.Flags().StringVar(&o.classifier, "classifier", classifier.DefaultClassifier, "the classifier whose answer column the data set has")
	return command(cmd, o)
}

func (o *evalSplit) Validate() error {
	if len(o.args) > 0 || o.data == "" {
		return usagef("eval split takes --data FILE.csv and no arguments")
	}
	return nil
}

func (o *evalSplit) Run(context.Context) error {
	cl, err := classifier.DefaultRegistry().Get(o.classifier)
	if err != nil {
		return err
	}
	n, err := evals.AssignSplitsFile(o.data, cl.AnswerField)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s: %d %s given a split\n", o.data, n, evals.Plural(n, "row", "rows"))
	return nil
}
