package evals

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// Report is what a run is written up as: report.md, report.json and the
// pictures, in one folder.
type Report struct {
	Data       string    `json:"data"`
	Classifier string    `json:"classifier"`
	Cases      int       `json:"cases"`
	Yes        int       `json:"yes"`
	No         int       `json:"no"`
	Doubtful   int       `json:"doubtful"`
	Repeat     int       `json:"repeat"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	Gate       string    `json:"gate"`
	Scores     []Score   `json:"scores"`
	// GateFailures lists, by candidate name, why it fell short.
	GateFailures map[string][]string `json:"gate_failures"`
	Images       Images              `json:"images"`
	// Answers are every answer of the run, by candidate.
	Answers []CandidateResult `json:"answers"`
}

// Images names the picture files of a report, relative to its folder.
type Images struct {
	AccuracyVsCost    string   `json:"accuracy_vs_cost"`
	AccuracyVsLatency string   `json:"accuracy_vs_latency"`
	Confusion         []string `json:"confusion"` // in the order of Scores
}

// NewReport puts a run's results, scores and gate verdicts together.
func NewReport(data string, res *Results, scores []Score, gate Gate) *Report {
	yes, no, doubtful := Balance(res.Cases)
	r := &Report{
		Data: data, Classifier: res.Classifier, Cases: len(res.Cases), Yes: yes, No: no, Doubtful: doubtful,
		Repeat: res.Repeat, Started: res.Started, Finished: res.Finished, Gate: gate.String(),
		Scores: scores, GateFailures: map[string][]string{}, Answers: res.Candidates,
	}
	for _, s := range scores {
		if why := gate.Check(s); len(why) > 0 {
			r.GateFailures[s.Name] = why
		}
	}
	return r
}

// Write renders the report into dir (created when needed): report.md,
// report.json, accuracy_vs_cost.png, accuracy_vs_latency.png and one
// confusion-N-….png per candidate. It returns the Markdown file's path, or
// an error when a file cannot be drawn or written.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create the report folder: %w", err)
	}
	if err := r.plot(dir); err != nil {
		return "", fmt.Errorf("error drawing the report's pictures: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("cannot write the report: %w", err)
	}
	md := filepath.Join(dir, "report.md")
	if err := os.WriteFile(md, []byte(r.Markdown()), 0o644); err != nil {
		return "", fmt.Errorf("cannot write the report: %w", err)
	}
	return md, nil
}

func (r *Report) plot(dir string) error {
	r.Images = Images{AccuracyVsCost: "accuracy_vs_cost.png", AccuracyVsLatency: "accuracy_vs_latency.png"}
	var byCost, byLatency []point
	for i, s := range r.Scores {
		if s.CostPer1K != nil {
			byCost = append(byCost, point{X: *s.CostPer1K, Y: s.Accuracy, Index: i, Label: s.Name})
		}
		byLatency = append(byLatency, point{X: s.LatencyP50MS / 1000, XHigh: s.LatencyP95MS / 1000, Y: s.Accuracy, Index: i, Label: s.Name})
	}
	if err := plotTradeOff(filepath.Join(dir, r.Images.AccuracyVsCost), "Accuracy vs cost",
		"estimated cost per 1,000 domains (USD)", byCost, "(no candidate's model has a price)"); err != nil {
		return err
	}
	if err := plotTradeOff(filepath.Join(dir, r.Images.AccuracyVsLatency), "Accuracy vs latency",
		"model latency p50 (s); bar to p95", byLatency, ""); err != nil {
		return err
	}
	for i, s := range r.Scores {
		name := fmt.Sprintf("confusion-%d-%s.png", i+1, slug(s.Name))
		if err := plotConfusion(filepath.Join(dir, name), s.Name, s.Confusion); err != nil {
			return err
		}
		r.Images.Confusion = append(r.Images.Confusion, name)
	}
	return nil
}

var nonSlug = regexp.MustCompile(`[^A-Za-z0-9._]+`)

func slug(s string) string {
	return strings.Trim(nonSlug.ReplaceAllString(s, "-"), "-")
}

// SummaryTable is the one-line-per-candidate Markdown table of a report.
func SummaryTable(scores []Score, failures map[string][]string) string {
	var b strings.Builder
	b.WriteString("| candidate | correct | accuracy | FN | FP | precision | recall | F1 | FAILED | flip rate | p50 | p95 | tokens in/out | cost per 1k | gate |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range scores {
		gate := "pass"
		if len(failures[s.Name]) > 0 {
			gate = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %.3f | %d | %d | %.3f | %.3f | %.3f | %d | %s | %s | %s | %s / %s | %s | %s |\n",
			s.Name, s.Correct, s.Total, s.Accuracy, s.Confusion.FN, s.Confusion.FP, s.Precision, s.Recall, s.F1,
			s.Failed, flipRate(s.FlipRate), ms(s.LatencyP50MS), ms(s.LatencyP95MS),
			count(s.PromptTokens), count(s.CompletionTokens), usd(s.CostPer1K), gate)
	}
	return b.String()
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("# Evaluation report: %s\n\n", r.Classifier)
	w("Data `%s`: %d domains, %d yes / %d no, %d marked doubtful. ", r.Data, r.Cases, r.Yes, r.No, r.Doubtful)
	w("Each candidate answered every domain %s. ", times(r.Repeat))
	calls, hits := 0, 0
	for _, s := range r.Scores {
		calls += s.ModelCalls
		hits += s.CacheHits
	}
	w("This run made %d model %s and took %d %s from the cache (%s, %s).\n\n",
		calls, Plural(calls, "call", "calls"), hits, Plural(hits, "answer", "answers"),
		r.Started.Format(time.RFC3339), r.Finished.Sub(r.Started).Round(time.Millisecond))
	w("Gate: %s.\n\n", r.Gate)

	w("## Summary\n\n")
	b.WriteString(SummaryTable(r.Scores, r.GateFailures))
	w("\nAccuracy counts FAILED answers as wrong. Precision, recall and F1 are on \"yes\", over the answers that are not FAILED. ")
	w("Latency is the model call's (p50 and p95, nearest rank); cost is the list price of the tokens of every answer (see the price table), per 1,000 answers.\n\n")
	for _, s := range r.Scores {
		for _, why := range r.GateFailures[s.Name] {
			w("- **%s** fails the gate: %s\n", s.Name, why)
		}
	}
	if len(r.GateFailures) > 0 {
		w("\n")
	}

	w("![Accuracy vs cost](%s)\n![Accuracy vs latency](%s)\n\n", r.Images.AccuracyVsCost, r.Images.AccuracyVsLatency)
	var unpriced []string
	for _, s := range r.Scores {
		if s.CostPer1K == nil {
			unpriced = append(unpriced, "`"+s.Candidate.Model+"`")
		}
	}
	if len(unpriced) > 0 {
		w("No price for %s: cost unknown, left out of the cost chart (add it with --prices).\n\n", strings.Join(dedupe(unpriced), ", "))
	}

	r.sliceTable(&b)
	r.kindTable(&b)

	for i, s := range r.Scores {
		w("## %s\n\n", s.Name)
		if i < len(r.Images.Confusion) {
			w("![Confusion matrix of %s](%s)\n\n", s.Name, r.Images.Confusion[i])
		}
		c := s.Confusion
		w("| label \\ answer | yes | no | FAILED |\n|---|---|---|---|\n")
		w("| yes | %d | %d | %d |\n| no | %d | %d | %d |\n\n", c.TP, c.FN, c.FailedYes, c.FP, c.TN, c.FailedNo)
		w("Accuracy %d/%d = %.3f; precision %.3f, recall %.3f, F1 %.3f. ", s.Correct, s.Total, s.Accuracy, s.Precision, s.Recall, s.F1)
		w("Model calls this run: %d, from cache: %d. Tokens: %d in, %d out. ", s.ModelCalls, s.CacheHits, s.PromptTokens, s.CompletionTokens)
		if s.CostUSD != nil {
			w("Estimated cost %s (%s per 1,000 answers at $%.2f / $%.2f per million tokens in / out).\n\n",
				usd(s.CostUSD), usd(s.CostPer1K), s.Price.Input, s.Price.Output)
		} else {
			w("Estimated cost unknown: no price for `%s`.\n\n", s.Candidate.Model)
		}
		if s.FlipRate != nil {
			w("Flip rate %s: %d of %d domains did not get the same answer in all %d samples", flipRate(s.FlipRate), len(s.Flipped), r.Cases, r.Repeat)
			if len(s.Flipped) > 0 {
				w(" (%s)", strings.Join(s.Flipped, ", "))
			}
			w(".\n\n")
		}
		w("Accuracy by confidence:\n\n| confidence | answers | correct | accuracy |\n|---|---|---|---|\n")
		for _, cs := range s.ByConfidence {
			if cs.Answers > 0 {
				w("| %d | %d | %d | %.3f |\n", cs.Confidence, cs.Answers, cs.Correct, cs.Accuracy)
			}
		}
		w("\n")
		missSection(&b, "False negatives (CPG answered no)", s.FalseNegatives, r.Repeat)
		missSection(&b, "False positives (not CPG answered yes)", s.FalsePositives, r.Repeat)
		missSection(&b, "FAILED", s.Failures, r.Repeat)
	}
	return b.String()
}

// sliceTable shows each candidate's accuracy by split and by whether the
// label is clear or doubtful: the test split is the score to believe
// (prompts are tuned on dev), and the gate counts clear rows.
func (r *Report) sliceTable(b *strings.Builder) {
	if len(r.Scores) == 0 || len(r.Scores[0].Slices) == 0 {
		return
	}
	b.WriteString("## By split, clear and doubtful labels\n\n| candidate |")
	for _, sl := range r.Scores[0].Slices {
		label := "clear"
		if sl.Doubtful {
			label = "doubtful"
		}
		fmt.Fprintf(b, " %s, %s |", sl.Split, label)
	}
	b.WriteString(" gate (clear rows) |\n|---|")
	for range r.Scores[0].Slices {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, s := range r.Scores {
		fmt.Fprintf(b, "| %s |", s.Name)
		for _, sl := range s.Slices {
			fmt.Fprintf(b, " %d/%d = %.3f (%d FN) |", sl.Correct, sl.Total, sl.Accuracy, sl.FN)
		}
		fmt.Fprintf(b, " %d/%d = %.3f, %d FN |\n", s.Clear.Correct, s.Clear.Total, s.Clear.Accuracy, s.Clear.FN)
	}
	b.WriteString("\nPrompts are tuned on `dev` only; `test` is held out (evals/README.md, \"Dev and test\"). ")
	b.WriteString("Doubtful labels are scored apart and not gated.\n\n")
}

func (r *Report) kindTable(b *strings.Builder) {
	if len(r.Scores) == 0 {
		return
	}
	b.WriteString("## Correct by kind of case\n\n| kind |")
	for _, s := range r.Scores {
		fmt.Fprintf(b, " %s |", s.Name)
	}
	b.WriteString("\n|---|")
	for range r.Scores {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i, k := range r.Scores[0].ByKind {
		fmt.Fprintf(b, "| %s |", k.Kind)
		for _, s := range r.Scores {
			ks := s.ByKind[i]
			mark := ""
			if ks.Correct < ks.Total {
				mark = " ✗"
			}
			fmt.Fprintf(b, " %d/%d%s |", ks.Correct, ks.Total, mark)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func missSection(b *strings.Builder, title string, ms []Miss, repeat int) {
	fmt.Fprintf(b, "%s: %d %s", title, len(ms), Plural(len(ms), "domain", "domains"))
	if len(ms) == 0 {
		b.WriteString(".\n\n")
		return
	}
	b.WriteString("\n\n")
	for _, m := range ms {
		fmt.Fprintf(b, "- `%s`", m.Domain)
		if m.Kind != "" {
			fmt.Fprintf(b, " (%s)", mdText(m.Kind))
		}
		if m.Doubtful {
			b.WriteString(" *doubtful*")
		}
		if repeat > 1 {
			fmt.Fprintf(b, " %d/%d", m.Times, m.Of)
		}
		if m.Confidence > 0 {
			fmt.Fprintf(b, " confidence %d", m.Confidence)
		}
		fmt.Fprintf(b, ": %s\n", mdText(m.Reason))
		evidenceList(b, m)
	}
	b.WriteString("\n")
}

// evidenceList links a miss to what the model was shown, one line a page:
// where to look first when deciding whether the model, the search or the
// label is wrong.
func evidenceList(b *strings.Builder, m Miss) {
	if m.Search == "" {
		return // no model call: nothing was shown
	}
	if len(m.Evidence) == 0 {
		fmt.Fprintf(b, "  - no evidence (search: %s)\n", m.Search)
		return
	}
	for _, e := range m.Evidence {
		title := cmp.Or(e.Title, e.URL)
		if classifier.EvidenceURLProblem(e.URL) == "" {
			fmt.Fprintf(b, "  - [%s](<%s>)", mdText(title), urlEscaper.Replace(e.URL))
		} else {
			// javascript:, data: and the like are no links to follow.
			fmt.Fprintf(b, "  - %s (not a web address, no link)", mdText(title))
		}
		if e.Snippet != "" {
			fmt.Fprintf(b, ": %s", mdText(classifier.Truncate(e.Snippet, 160)))
		}
		b.WriteString("\n")
	}
}

// mdText keeps text from a model or a web page from turning into Markdown
// or HTML, on one line: control characters fold into spaces; brackets and
// the characters that start emphasis or code are escaped; <, > and & become
// entities, so no tag (<img onerror=…>) or entity survives.
func mdText(s string) string {
	return mdEscaper.Replace(classifier.FoldLine(s))
}

// urlEscaper keeps an address inside the <…> of a Markdown link.
var urlEscaper = strings.NewReplacer("<", "%3C", ">", "%3E", " ", "%20", "\n", "")

var mdEscaper = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;",
	"&", "&amp;")

func flipRate(r *float64) string {
	if r == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", *r)
}

func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func usd(v *float64) string {
	switch {
	case v == nil:
		return "unknown"
	case *v < 0.01:
		return fmt.Sprintf("$%.5f", *v)
	}
	return fmt.Sprintf("$%.2f", *v)
}

func count(n int) string {
	if n >= 10000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times (--repeat)", n)
}

// Plural returns one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func dedupe(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
