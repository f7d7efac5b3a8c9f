package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
	"github.com/domainclass/domainclass/evals"
)

const evalSynopsis = `eval --data FILE.csv [--models m1,m2] [--prompts v1,v2] [--search none,homepage,brave]
       [--repeat N] [--concurrency N] [--cache DIR | --no-cache] [--out DIR] [--prices FILE]
       [--max-fn N] [--min-accuracy X] [--max-failed N]

Runs every candidate (model × prompt version × search provider) over a labelled
data set through the worker's own search and model step, against the
OPENAI_BASE_URL / OPENAI_API_KEY endpoint, and writes a Markdown and JSON report
with pictures to --out. With a gate flag it exits 1 when a candidate falls short.

Flags:`

// runEval is `domainclass eval`: wiring only; the work is in package evals.
func runEval(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("eval", evalSynopsis, stdout)
	data := fs.String("data", "", "labelled data set (CSV: domain, is_cpg, doubtful, kind, rationale); see evals/README.md")
	classifierName := fs.String("classifier", classifier.DefaultClassifier, "the classifier to evaluate")
	models := fs.String("models", "", "comma-separated model names (default OPENAI_MODEL)")
	prompts := fs.String("prompts", "", "comma-separated prompt versions (default the classifier's current prompt)")
	searches := fs.String("search", "", "comma-separated search providers: none, homepage, brave (default SEARCH_PROVIDER)")
	repeat := fs.Int("repeat", 1, "ask about every domain N times, to measure how often answers flip")
	concurrency := fs.Int("concurrency", 0, "answers in flight at once (default LLM_MAX_CONCURRENCY)")
	rate := fs.Int("rate", 0, "model calls started per minute at most (default LLM_RATE_PER_MINUTE)")
	cacheDir := fs.String("cache", "evals/.cache", "folder of cached model responses and search evidence")
	noCache := fs.Bool("no-cache", false, "ask the model and search again for everything, and keep nothing")
	out := fs.String("out", "evals/report", "folder for report.md, report.json and the pictures")
	pricesFile := fs.String("prices", "", "YAML price table to put before the built-in one (evals/prices.yaml)")
	maxFN := fs.Int("max-fn", -1, "gate: most false negatives allowed per candidate (-1: no limit)")
	minAccuracy := fs.Float64("min-accuracy", 0, "gate: lowest accuracy allowed per candidate, 0 to 1 (0: no limit)")
	maxFailed := fs.Int("max-failed", -1, "gate: most FAILED answers allowed per candidate (-1: no limit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("eval takes no arguments, got %q", strings.Join(fs.Args(), " "))}
	}
	switch {
	case *data == "":
		return &usageError{"eval needs --data FILE.csv (for example evals/cpg.csv)"}
	case *repeat < 1:
		return &usageError{"--repeat must be at least 1"}
	case *concurrency < 0 || *rate < 0:
		return &usageError{"--concurrency and --rate must be positive"}
	case *minAccuracy < 0 || *minAccuracy > 1:
		return &usageError{"--min-accuracy must be between 0 and 1"}
	}
	c, err := classifier.DefaultRegistry().Get(*classifierName)
	if err != nil {
		return &usageError{classifier.ErrorMessage(err)}
	}

	cfg, err := LoadConfig(environ)
	if err != nil {
		return err
	}
	modelList := splitList(*models, cfg.OpenAIModel)
	promptList := splitList(*prompts, c.CurrentPrompt)
	searchList := splitList(*searches, cfg.SearchProvider)
	for _, v := range promptList {
		if _, err := c.Prompt(v); err != nil {
			return &usageError{classifier.ErrorMessage(err)}
		}
	}
	for _, s := range searchList {
		if !slices.Contains([]string{search.ProviderNone, search.ProviderHomepage, search.ProviderBrave}, s) {
			return &usageError{fmt.Sprintf("unknown search provider %q (want none, homepage or brave)", s)}
		}
	}
	if cfg.OpenAIAPIKey == "" {
		return errors.New("eval needs a model: set OPENAI_API_KEY (any value for a local server) and, for a server other than OpenAI, OPENAI_BASE_URL")
	}

	cases, err := evals.LoadCases(*data, c.AnswerField)
	if err != nil {
		return err
	}
	prices := evals.DefaultPrices()
	if *pricesFile != "" {
		if prices, err = evals.LoadPrices(*pricesFile); err != nil {
			return err
		}
	}
	if *concurrency == 0 {
		*concurrency = cfg.Settings.LLMMaxConcurrency
	}
	if *rate == 0 {
		*rate = cfg.Settings.LLMRatePerMinute
	}
	client, err := llm.New(llm.Config{
		BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey, Timeout: cfg.Settings.LLMTimeout,
		ResponseFormat: cfg.LLMResponseFormat,
	})
	if err != nil {
		return err
	}
	searchers := map[string]classifier.Searcher{}
	for _, name := range searchList {
		if searchers[name], err = search.New(search.Config{
			Provider: name, Timeout: cfg.Settings.SearchTimeout, AllowPrivate: cfg.SearchAllowPrivate,
			BraveAPIKey: cfg.BraveAPIKey, BraveBaseURL: cfg.BraveBaseURL, UserAgent: "domainclass/" + Version,
		}); err != nil {
			return err
		}
	}
	var cache *evals.Cache
	if !*noCache {
		if cache, err = evals.OpenCache(*cacheDir); err != nil {
			return err
		}
	}

	candidates := evals.Candidates(modelList, promptList, searchList)
	progress := evals.NewProgress(stderr, len(candidates)*len(cases)*(*repeat), isTerminal(stderr))
	res, err := evals.Run(ctx, evals.Config{
		Classifier: c, Cases: cases, Candidates: candidates, Repeat: *repeat, Concurrency: *concurrency,
		LLM: llm.Limit(client, *concurrency, *rate), Searchers: searchers, Cache: cache,
		OnAnswer: progress.Add, Logger: cfg.NewLogger(stderr),
	})
	if err != nil {
		return fmt.Errorf("eval stopped: %w", err)
	}
	gate := evals.Gate{MaxFN: *maxFN, MinAccuracy: *minAccuracy, MaxFailed: *maxFailed}
	report := evals.NewReport(*data, res, evals.ScoreAll(res, prices), gate)
	path, err := report.Write(*out)
	if err != nil {
		return err
	}

	yes, no, doubtful := evals.Balance(cases)
	fmt.Fprintf(stdout, "%d domains (%d yes, %d no, %d doubtful) × %d %s × %d:\n\n",
		len(cases), yes, no, doubtful, len(candidates), plural(len(candidates), "candidate", "candidates"), *repeat)
	fmt.Fprint(stdout, evals.SummaryTable(report.Scores, report.GateFailures))
	fmt.Fprintf(stdout, "\nreport: %s\n", path)
	if len(report.GateFailures) == 0 {
		return nil
	}
	for _, s := range report.Scores {
		if why := report.GateFailures[s.Name]; len(why) > 0 {
			fmt.Fprintf(stderr, "eval gate: %s: %s\n", s.Name, strings.Join(why, "; "))
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
