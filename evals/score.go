package evals

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
)

// Score is how one candidate did. Every answer counts: with --repeat N a
// domain is answered N times, and Total is cases × N.
type Score struct {
	Candidate Candidate `json:"candidate"`
	Name      string    `json:"name"`
	Total     int       `json:"total"`
	Correct   int       `json:"correct"`
	// Accuracy is Correct / Total; FAILED answers count as wrong.
	Accuracy  float64   `json:"accuracy"`
	Confusion Confusion `json:"confusion"`
	// Precision, Recall and F1 are on "yes", over the answers that are not
	// FAILED; 0 when undefined (no yes answers, or no yes labels).
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	Failed    int     `json:"failed"`

	FalseNegatives []Miss `json:"false_negatives"`
	FalsePositives []Miss `json:"false_positives"`
	Failures       []Miss `json:"failures"`

	// ByConfidence is the accuracy of the answers given with each
	// confidence, 1 to 5: is a 5 really surer than a 3?
	ByConfidence []ConfidenceScore `json:"by_confidence"`
	ByKind       []KindScore       `json:"by_kind"`
	// Slices are the same answers by split (dev, test; "all" without a
	// split column) and by whether the label is clear or doubtful.
	Slices []SliceScore `json:"slices"`
	// Clear is the score over the rows whose label is not doubtful: what
	// the gate counts.
	Clear SliceScore `json:"clear"`

	// FlipRate is the share of domains whose answers (yes, no or FAILED)
	// were not all the same across the samples; nil without --repeat.
	FlipRate *float64 `json:"flip_rate"`
	Flipped  []string `json:"flipped,omitempty"`

	// Latency of the model calls (the cached original latency on a cache
	// hit), nearest-rank percentiles, in milliseconds.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP95MS float64 `json:"latency_p95_ms"`

	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CostUSD is the list price of every answer's tokens (cache hits
	// included: it is what the answers cost, not what this run paid).
	// CostPer1K is per 1,000 answers. Both are nil for a model without a
	// price.
	CostUSD   *float64   `json:"cost_usd"`
	CostPer1K *float64   `json:"cost_per_1k_usd"`
	Price     *llm.Price `json:"price,omitempty"`

	ModelCalls int `json:"model_calls"`
	CacheHits  int `json:"cache_hits"`
}

// Confusion counts answers by label and answer. FAILED answers are kept
// apart, by label.
type Confusion struct {
	TP        int `json:"tp"` // yes, answered yes
	FN        int `json:"fn"` // yes, answered no
	FP        int `json:"fp"` // no, answered yes
	TN        int `json:"tn"` // no, answered no
	FailedYes int `json:"failed_yes"`
	FailedNo  int `json:"failed_no"`
}

// Miss is a domain a candidate got wrong (or FAILED) in at least one sample.
type Miss struct {
	Domain   string `json:"domain"`
	Doubtful bool   `json:"doubtful,omitempty"`
	Kind     string `json:"kind,omitempty"`
	// Times of Of samples went this way.
	Times int `json:"times"`
	Of    int `json:"of"`
	// Reason is the model's reasoning (or the error) of the first such
	// sample.
	Reason     string `json:"reason"`
	Confidence int    `json:"confidence,omitempty"`
	// Search and Evidence are what the model was shown for that sample.
	Search   string                    `json:"search,omitempty"`
	Evidence []classifier.EvidenceItem `json:"evidence,omitempty"`
}

// ConfidenceScore is the accuracy of the answers given with one confidence.
type ConfidenceScore struct {
	Confidence int     `json:"confidence"`
	Answers    int     `json:"answers"`
	Correct    int     `json:"correct"`
	Accuracy   float64 `json:"accuracy"`
}

// KindScore is the accuracy on one kind of case.
type KindScore struct {
	Kind    string `json:"kind"`
	Total   int    `json:"total"`
	Correct int    `json:"correct"`
}

// SliceScore is a score over some of the rows.
type SliceScore struct {
	Split    string  `json:"split"`
	Doubtful bool    `json:"doubtful"`
	Total    int     `json:"total"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	FN       int     `json:"false_negatives"`
	FP       int     `json:"false_positives"`
	Failed   int     `json:"failed"`
}

func (sl *SliceScore) add(correct, fn, fp, failed bool) {
	sl.Total++
	for _, x := range []struct {
		on bool
		n  *int
	}{{correct, &sl.Correct}, {fn, &sl.FN}, {fp, &sl.FP}, {failed, &sl.Failed}} {
		if x.on {
			*x.n++
		}
	}
	sl.Accuracy = ratio(sl.Correct, sl.Total)
}

// ScoreAll scores every candidate of a run, pricing tokens with prices.
func ScoreAll(res *Results, prices llm.Prices) []Score {
	scores := make([]Score, len(res.Candidates))
	for i, cr := range res.Candidates {
		scores[i] = score(res.Cases, res.Repeat, cr, prices)
	}
	return scores
}

func score(cases []Case, repeat int, cr CandidateResult, prices llm.Prices) Score {
	t := newScoreTally(cr)
	for ci, c := range cases {
		t.addCase(c, cr.Answers[ci*repeat:(ci+1)*repeat], repeat)
	}
	return t.finish(len(cases), repeat, cr.Candidate.Model, prices)
}

// scoreTally is what score counts answer by answer, before the counts are
// turned into rates.
type scoreTally struct {
	s         Score
	byConf    []ConfidenceScore
	kinds     map[string]*KindScore
	bySlice   map[[2]string]*SliceScore
	latencies []float64
	flipped   int
}

// caseMisses are one case's answers that were wrong, by how.
type caseMisses struct {
	fn, fp, failed []Answer
}

func newScoreTally(cr CandidateResult) *scoreTally {
	t := &scoreTally{
		s:       Score{Candidate: cr.Candidate, Name: cr.Candidate.String(), ModelCalls: cr.ModelCalls, CacheHits: cr.CacheHits},
		byConf:  make([]ConfidenceScore, 5),
		kinds:   map[string]*KindScore{},
		bySlice: map[[2]string]*SliceScore{},
	}
	for i := range t.byConf {
		t.byConf[i].Confidence = i + 1
	}
	t.s.Clear = SliceScore{Split: "all"}
	return t
}

// addCase counts the repeat answers to case c, keeps its misses and notes
// whether its answers flipped between runs.
func (t *scoreTally) addCase(c Case, answers []Answer, repeat int) {
	var m caseMisses
	for _, a := range answers {
		t.s.Total++
		t.countConfusion(c, a, &m)
		t.countAnswer(c, a)
	}
	s := &t.s
	s.FalseNegatives = appendMiss(s.FalseNegatives, c, m.fn, repeat)
	s.FalsePositives = appendMiss(s.FalsePositives, c, m.fp, repeat)
	s.Failures = appendMiss(s.Failures, c, m.failed, repeat)
	for _, a := range answers[1:] {
		if a.Outcome() != answers[0].Outcome() {
			t.flipped++
			s.Flipped = append(s.Flipped, c.Domain)
			break
		}
	}
}

// countConfusion puts answer a to case c in its cell of the confusion
// matrix and, when it is wrong, among m's misses.
func (t *scoreTally) countConfusion(c Case, a Answer, m *caseMisses) {
	cm := &t.s.Confusion
	switch {
	case a.Status != classifier.StatusCompleted && c.Label:
		cm.FailedYes++
		m.failed = append(m.failed, a)
	case a.Status != classifier.StatusCompleted:
		cm.FailedNo++
		m.failed = append(m.failed, a)
	case c.Label && a.Answer:
		cm.TP++
	case c.Label:
		cm.FN++
		m.fn = append(m.fn, a)
	case a.Answer:
		cm.FP++
		m.fp = append(m.fp, a)
	default:
		cm.TN++
	}
}

// countAnswer adds answer a to case c to the totals, its slice, its
// confidence, its kind and the latency and token sums.
func (t *scoreTally) countAnswer(c Case, a Answer) {
	correct := a.Status == classifier.StatusCompleted && a.Answer == c.Label
	if correct {
		t.s.Correct++
	}
	t.countSlices(c, a, correct)
	if a.Status == classifier.StatusCompleted && a.Confidence >= 1 && a.Confidence <= 5 {
		b := &t.byConf[a.Confidence-1]
		b.Answers++
		if correct {
			b.Correct++
		}
	}
	kind := c.Kind
	if kind == "" {
		kind = "-"
	}
	if t.kinds[kind] == nil {
		t.kinds[kind] = &KindScore{Kind: kind}
	}
	t.kinds[kind].Total++
	if correct {
		t.kinds[kind].Correct++
	}
	if a.Called {
		t.latencies = append(t.latencies, a.LatencyMS)
		t.s.PromptTokens += a.PromptTokens
		t.s.CompletionTokens += a.CompletionTokens
	}
}

// countSlices adds answer a to case c to its split's slice and, for a case
// that is not doubtful, to the clear cases' slice.
func (t *scoreTally) countSlices(c Case, a Answer, correct bool) {
	split := cmp.Or(c.Split, "all")
	key := [2]string{split, strconv.FormatBool(c.Doubtful)}
	if t.bySlice[key] == nil {
		t.bySlice[key] = &SliceScore{Split: split, Doubtful: c.Doubtful}
	}
	isFN := a.Status == classifier.StatusCompleted && c.Label && !a.Answer
	isFP := a.Status == classifier.StatusCompleted && !c.Label && a.Answer
	isFailed := a.Status != classifier.StatusCompleted
	t.bySlice[key].add(correct, isFN, isFP, isFailed)
	if !c.Doubtful {
		t.s.Clear.add(correct, isFN, isFP, isFailed)
	}
}

// finish turns the counts into the Score's rates, breakdowns, latencies
// and cost (when prices know the model).
func (t *scoreTally) finish(cases, repeat int, model string, prices llm.Prices) Score {
	s := t.s
	s.Failed = s.Confusion.FailedYes + s.Confusion.FailedNo
	s.Accuracy = ratio(s.Correct, s.Total)
	s.Precision = ratio(s.Confusion.TP, s.Confusion.TP+s.Confusion.FP)
	s.Recall = ratio(s.Confusion.TP, s.Confusion.TP+s.Confusion.FN)
	if s.Precision+s.Recall > 0 {
		s.F1 = 2 * s.Precision * s.Recall / (s.Precision + s.Recall)
	}
	for i := range t.byConf {
		t.byConf[i].Accuracy = ratio(t.byConf[i].Correct, t.byConf[i].Answers)
	}
	s.ByConfidence = t.byConf
	for _, k := range sortedKeys(t.kinds) {
		s.ByKind = append(s.ByKind, *t.kinds[k])
	}
	for _, split := range []string{SplitDev, SplitTest, "all"} {
		for _, doubtful := range []bool{false, true} {
			if sl := t.bySlice[[2]string{split, strconv.FormatBool(doubtful)}]; sl != nil {
				s.Slices = append(s.Slices, *sl)
			}
		}
	}
	if repeat > 1 {
		r := ratio(t.flipped, cases)
		s.FlipRate = &r
	}
	s.LatencyP50MS = percentile(t.latencies, 50)
	s.LatencyP95MS = percentile(t.latencies, 95)
	if p, ok := prices.Lookup(model); ok {
		cost := p.Cost(s.PromptTokens, s.CompletionTokens)
		per1k := cost / float64(max(s.Total, 1)) * 1000
		s.CostUSD, s.CostPer1K, s.Price = &cost, &per1k, &p
	}
	return s
}

func appendMiss(misses []Miss, c Case, answers []Answer, of int) []Miss {
	if len(answers) == 0 {
		return misses
	}
	first := answers[0]
	reason := first.Reasoning
	if first.Status != classifier.StatusCompleted {
		reason = first.Error
	}
	return append(misses, Miss{
		Domain: c.Domain, Doubtful: c.Doubtful, Kind: c.Kind, Times: len(answers), Of: of,
		Reason: reason, Confidence: first.Confidence, Search: first.Search, Evidence: first.Evidence,
	})
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// percentile is the nearest-rank percentile: the smallest value with at
// least p% of the values at or below it; 0 for no values.
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	return v[min(max(rank, 1), len(v))-1]
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
