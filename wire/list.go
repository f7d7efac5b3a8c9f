package wire

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// ListAccepted is the 202 answer to POST /lists.
type ListAccepted struct {
	ListID     string            `json:"list_id"`
	Status     classifier.Status `json:"status"`
	StatusURL  string            `json:"status_url"`
	ResultsURL string            `json:"results_url"`
	Classifier string            `json:"classifier"`
	Rows       int               `json:"rows"`
	Domains    int               `json:"domains"`
	Duplicates int               `json:"duplicates"`
	Rejected   int               `json:"rejected"`
	// RejectedSample is the first rejected rows, at most MaxRejectedSample.
	RejectedSample []RejectedRow `json:"rejected_sample"`
}

// MaxRejectedSample bounds ListAccepted.RejectedSample and the errors of a
// list refused for having no valid row.
const MaxRejectedSample = 100

// RejectedRow is a row that is not a domain, and why.
type RejectedRow struct {
	Row    int    `json:"row"`
	Input  string `json:"input"`
	Reason string `json:"reason"`
}

// ListEstimate is the 200 answer to POST /lists?dry_run=true: what the list
// would cost, with nothing written.
type ListEstimate struct {
	Rows       int `json:"rows"`
	Domains    int `json:"domains"`
	Duplicates int `json:"duplicates"`
	Rejected   int `json:"rejected"`
	// Override domains (those an override answers) and Cache ones (a
	// fresh earlier answer) are answered without the model; LLM ones need
	// one model call each. The names are the sources of the answers they
	// get, as in ListProgress and each result's source.
	Override int `json:"override"`
	Cache    int `json:"cache"`
	LLM      int `json:"llm"`
	// Overridden, Cached and Fresh are Override, Cache and LLM under their
	// first names, kept for one release for their callers.
	//
	// Deprecated: read Override, Cache and LLM.
	Overridden int `json:"overridden"`
	// Deprecated: read Cache.
	Cached int `json:"cached"`
	// Deprecated: read LLM.
	Fresh int `json:"fresh"`
	// Known is Override under an older name still, kept for its callers.
	//
	// Deprecated: read Override; "known" is the source of answers from
	// the known-companies list of old, not a count of overrides.
	Known      int `json:"known"`
	ModelCalls int `json:"model_calls"`
	// EstimatedCostUSD is null for a model the price table does not list.
	// It and EstimatedSeconds are the asked tier's; Tiers has both.
	EstimatedCostUSD *float64                `json:"estimated_cost_usd"`
	EstimatedSeconds float64                 `json:"estimated_seconds"`
	Model            string                  `json:"model"`
	Tier             string                  `json:"tier"`
	Tiers            map[string]TierEstimate `json:"tiers"`
	// Basis is what the standard tier's time was computed from.
	Basis EstimateBasis `json:"basis"`
}

// EstimateBasis is what an estimate's time comes from: the model answers a
// second the deployment gives (Measured: from its answers while lists ran
// in the last minutes; else from the configured bounds of one worker
// process, with calls of SecondsPerCall: the median of the last
// CallsSampled model calls and the search, or a prior when none was
// measured), the rows a second it answers without the model
// (RowsMeasured: from the recent lists answered so; else from the CPU a
// row costs), the other lists not yet ended that the capacity is shared
// with, which of these bounds the time (Bound: measured, concurrency, rate
// or rows) and, in Summary, all that in a sentence that names the setting
// to raise.
type EstimateBasis struct {
	ModelAnswersPerSecond float64 `json:"model_answers_per_second"`
	Measured              bool    `json:"measured"`
	SecondsPerCall        float64 `json:"seconds_per_call"`
	CallsSampled          int     `json:"calls_sampled"`
	RowsPerSecond         float64 `json:"rows_per_second"`
	RowsMeasured          bool    `json:"rows_measured"`
	ListsSharing          int     `json:"lists_sharing"`
	Bound                 string  `json:"bound"`
	Summary               string  `json:"summary"`
}

// What bounds an estimate's time (EstimateBasis.Bound).
const (
	// BoundMeasured: the model answers a second this deployment measurably
	// gave.
	BoundMeasured = "measured"
	// BoundConcurrency: a worker process's calls in flight
	// (LLM_MAX_CONCURRENCY) of SecondsPerCall each.
	BoundConcurrency = "concurrency"
	// BoundRate: a worker process's model calls a minute
	// (LLM_RATE_PER_MINUTE).
	BoundRate = "rate"
	// BoundRows: the rows answered a second, model or not.
	BoundRows = "rows"
)

// TierEstimate is a list's estimate in one tier.
type TierEstimate struct {
	EstimatedCostUSD *float64 `json:"estimated_cost_usd"`
	EstimatedSeconds float64  `json:"estimated_seconds"`
}

// ListStatus is a list as callers see it: GET /lists/{id}, the answer to
// DELETE /lists/{id}, and the body of a list.completed webhook.
type ListStatus struct {
	ListID      string            `json:"list_id"`
	Classifier  string            `json:"classifier"`
	Status      classifier.Status `json:"status"`
	CreatedAt   time.Time         `json:"created_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	// ExpiresAt is when an ended list and its results are purged (at the
	// earliest); null while it runs.
	ExpiresAt  *time.Time   `json:"expires_at"`
	Rows       int          `json:"rows"`
	Domains    int          `json:"domains"`
	Progress   ListProgress `json:"progress"`
	ResultsURL string       `json:"results_url"`
	Error      string       `json:"error,omitempty"`
	// Tier is standard or economy; CostUSD what its model calls cost so
	// far, from the price table.
	Tier    string  `json:"tier"`
	CostUSD float64 `json:"cost_usd"`
	// Waiting says, while the list runs and its counts stand still, what
	// its work waits for (a provider outage, a worker process that died,
	// no worker running, other work's claims), since WaitingSince; omitted
	// when nothing.
	Waiting      string     `json:"waiting,omitempty"`
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	// LastError is the last failure of the list's work (retried, not a
	// row's failure), at LastErrorAt; RunErrors counts such failures.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	RunErrors   int        `json:"run_errors"`
}

// Ended reports whether the list has ended: COMPLETED, CANCELLED or FAILED.
func (s *ListStatus) Ended() bool {
	return s.Status == classifier.StatusCompleted || s.Status == classifier.StatusCancelled || s.Status == classifier.StatusFailed
}

// ListProgress counts a list's rows: Done of Total are final, by outcome,
// and the completed ones by where their answer came from (Known: from the
// known-companies list, in lists answered before overrides replaced it).
type ListProgress struct {
	Done      int `json:"done"`
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Rejected  int `json:"rejected"`
	Cancelled int `json:"cancelled"`
	Override  int `json:"override"`
	Known     int `json:"known"`
	Cache     int `json:"cache"`
	LLM       int `json:"llm"`
}

// ListStatusURL and ListResultsURL are where a list is read.
func ListStatusURL(id string) string  { return "/lists/" + id }
func ListResultsURL(id string) string { return "/lists/" + id + "/results" }

// NewListStatus returns list l as callers see it. Rows not final when the
// list was cancelled count as cancelled; when it was given up, as failed.
func NewListStatus(l *classifier.List) ListStatus {
	p := ListProgress{Done: l.Done + l.Unfinished(), Total: l.Rows, Completed: l.Completed, Failed: l.Failed,
		Rejected: l.Rejected, Override: l.Override, Known: l.Known, Cache: l.Cache, LLM: l.LLM}
	switch l.Status {
	case classifier.StatusCancelled:
		p.Cancelled = l.Unfinished()
	case classifier.StatusFailed:
		p.Failed += l.Unfinished()
	}
	id := l.ID.String()
	s := ListStatus{ListID: id, Classifier: l.Classifier, Status: l.Status, CreatedAt: l.CreatedAt.UTC(),
		CompletedAt: utc(l.CompletedAt), ExpiresAt: utc(l.ExpiresAt()), Rows: l.Rows, Domains: l.Domains, Progress: p,
		ResultsURL: ListResultsURL(id), Error: l.Error, Tier: cmp.Or(l.Tier, classifier.TierStandard),
		CostUSD: math.Round(l.CostUSD*1e6) / 1e6, LastError: l.LastError, LastErrorAt: utc(l.LastErrorAt), RunErrors: l.RunErrors}
	if !l.Ended() {
		s.Waiting, s.WaitingSince = l.Waiting, utc(l.WaitingSince)
	}
	return s
}

// ListRow is one row of GET /lists/{id}/results: a line of NDJSON, or of
// CSV with the columns of ListRowColumns in that order.
type ListRow struct {
	Row    int               `json:"row"`
	Input  string            `json:"input"`
	Ref    string            `json:"ref,omitempty"`
	Domain string            `json:"domain,omitempty"`
	Status classifier.Status `json:"status"`
	// Answer is the classifier's yes or no (COMPLETED only), as in
	// ResultReport: again under AnswerField in the JSON.
	Answer       *bool             `json:"answer,omitempty"`
	Confidence   *int              `json:"confidence,omitempty"`
	Reasoning    string            `json:"reasoning,omitempty"`
	Source       classifier.Source `json:"source,omitempty"`
	ClassifiedAt *time.Time        `json:"classified_at,omitempty"`
	// Error is why a FAILED row failed. A REJECTED row's reason is in it
	// too: for one release in the JSON (read Reason), and always in the
	// CSV, whose columns do not move.
	Error string `json:"error,omitempty"`
	// Reason is why a REJECTED row is not a domain, under the name a
	// rejected input's reason has everywhere (rejected_sample, a
	// problem's errors).
	Reason string `json:"reason,omitempty"`
	Provenance
	// AnswerField is the classifier's own name for Answer, as in
	// ResultReport.
	AnswerField string `json:"-"`
}

// MarshalJSON writes the row with its answer under both keys.
func (r ListRow) MarshalJSON() ([]byte, error) {
	type plain ListRow // without this method
	b, err := marshalUnescaped(plain(r))
	if err != nil {
		return nil, err
	}
	return withAnswerField(b, r.AnswerField, r.Answer), nil
}

// ListRowColumns is the header of the CSV results of a classifier whose
// answer field is answerField (Registry.AnswerField). The answer is the
// sixth column, named by that field (is_cpg for cpg), and again the last,
// "answer", the same for every classifier. Columns added later come after
// the first ones, so that a reader of the older columns by position still
// works; evidence_urls are the evidence's addresses, separated by spaces
// (an address has none). A classifier no longer defined has "answer" as
// its sixth column and no last one. A REJECTED row's reason is in "error"
// (the CSV has no "reason" column: "answer" stays the last).
func ListRowColumns(answerField string) []string {
	cols := []string{"row", "input", "ref", "domain", "status", cmp.Or(answerField, "answer"), "confidence", "reasoning",
		"source", "classified_at", "error", "model", "prompt_version", "evidence_urls"}
	if answerField != "" {
		cols = append(cols, "answer")
	}
	return cols
}

// NewListRow returns row r as callers see it; answerField is its
// classifier's (Registry.AnswerField).
func NewListRow(r *classifier.ListRow, answerField string) ListRow {
	rr := NewResultReport(r.Result, answerField)
	row := ListRow{Row: r.Row, Input: r.Input, Ref: r.Ref, Domain: rr.Domain, Status: rr.Status, Answer: rr.Answer,
		Confidence: rr.Confidence, Reasoning: rr.Reasoning, Source: rr.Source, ClassifiedAt: rr.ClassifiedAt, Error: rr.Error,
		Provenance: rr.Provenance, AnswerField: answerField}
	if row.Status == classifier.StatusRejected {
		row.Reason = row.Error // and in Error for one release
	}
	return row
}

// CSV returns the row's fields in ListRowColumns(r.AnswerField) order,
// appended to buf.
func (r *ListRow) CSV(buf []string) []string {
	answer, confidence, classifiedAt := "", "", ""
	if r.Answer != nil {
		answer = strconv.FormatBool(*r.Answer)
	}
	if r.Confidence != nil {
		confidence = strconv.Itoa(*r.Confidence)
	}
	if r.ClassifiedAt != nil {
		classifiedAt = r.ClassifiedAt.Format(time.RFC3339Nano)
	}
	var urls strings.Builder
	for i, e := range r.Evidence {
		if i > 0 {
			urls.WriteByte(' ')
		}
		urls.WriteString(e.URL)
	}
	buf = append(buf, strconv.Itoa(r.Row), r.Input, r.Ref, r.Domain, string(r.Status), answer, confidence,
		r.Reasoning, string(r.Source), classifiedAt, r.Error, r.Model, r.PromptVersion, urls.String())
	if r.AnswerField != "" {
		buf = append(buf, answer)
	}
	return buf
}

// EventListCompleted is the type of the webhook sent when a list ends,
// COMPLETED, CANCELLED or FAILED.
const EventListCompleted = "list.completed"

// ListWebhookPayload is the body of a list.completed delivery: the list's
// status (not its rows; fetch those from results_url), the event type and
// when the list ended.
type ListWebhookPayload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	ListStatus
}
