// Package wire defines the JSON documents of the HTTP API and of its
// webhooks: what callers send and what they get back. The handlers, the
// webhook worker and the Go client (package client) all use these types,
// so each shape is written once; /openapi.yaml describes the same documents
// and a test holds the two together.
package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/domainclass/domainclass/classifier"
)

// MaxDomainsPerJob is the most distinct domains (after normalization) one
// POST /domains/classify may carry.
const MaxDomainsPerJob = 10

// ClassifyRequest is the body of POST /domains/classify.
type ClassifyRequest struct {
	// Classifier defaults to "cpg" when left out.
	Classifier string   `json:"classifier,omitempty"`
	Domains    []string `json:"domains"`
	// MaxAge ("720h") makes an older cached answer stale for this job;
	// Refresh asks the model again whatever the cache holds.
	MaxAge  string `json:"max_age,omitempty"`
	Refresh bool   `json:"refresh,omitempty"`
}

// Accepted is the 202 answer to POST /domains/classify.
type Accepted struct {
	JobID      string            `json:"job_id"`
	Status     classifier.Status `json:"status"`
	StatusURL  string            `json:"status_url"`
	Classifier string            `json:"classifier"`
	Domains    []DomainInput     `json:"domains"`
}

// DomainInput pairs an input with the domain it was read as.
type DomainInput struct {
	Input  string `json:"input"`
	Domain string `json:"domain"`
}

// DomainInputs converts normalized inputs to their wire form.
func DomainInputs(ds []classifier.DomainInput) []DomainInput {
	out := make([]DomainInput, len(ds))
	for i, d := range ds {
		out[i] = DomainInput{Input: d.Input, Domain: d.Domain}
	}
	return out
}

// JobReport is a job as callers see it: the body of GET
// /domains/classify/{id}, and of a webhook delivery (WebhookPayload).
type JobReport struct {
	JobID       string            `json:"job_id"`
	Classifier  string            `json:"classifier"`
	Status      classifier.Status `json:"status"`
	Error       string            `json:"error,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	Progress    Progress          `json:"progress"`
	Results     []ResultReport    `json:"results"`
}

// Ended reports whether the job has ended, COMPLETED or FAILED.
func (r *JobReport) Ended() bool {
	return r.Status == classifier.StatusCompleted || r.Status == classifier.StatusFailed
}

// Progress counts a job's final domains.
type Progress struct {
	Total int `json:"total"`
	Done  int `json:"done"`
}

// ResultReport is one domain's answer as callers see it.
type ResultReport struct {
	Domain string            `json:"domain"`
	Status classifier.Status `json:"status"`
	// Answer is the classifier's yes or no (COMPLETED only), under the
	// same key for every classifier; the JSON carries it again under the
	// classifier's own AnswerField (is_cpg for cpg).
	Answer       *bool             `json:"answer,omitempty"`
	Confidence   *int              `json:"confidence,omitempty"`
	Reasoning    string            `json:"reasoning,omitempty"`
	Source       classifier.Source `json:"source,omitempty"`
	ClassifiedAt *time.Time        `json:"classified_at,omitempty"`
	Error        string            `json:"error,omitempty"`
	Provenance
	// AnswerField is the classifier's own name for Answer; "" for a
	// classifier no longer defined (the answer is under "answer" alone).
	// Decoding leaves it "": read Answer.
	AnswerField string `json:"-"`
}

// MarshalJSON writes the report with its answer under both keys.
func (r ResultReport) MarshalJSON() ([]byte, error) {
	type plain ResultReport // without this method
	b, err := marshalUnescaped(plain(r))
	if err != nil {
		return nil, err
	}
	return withAnswerField(b, r.AnswerField, r.Answer), nil
}

// marshalUnescaped is json.Marshal without HTML escaping: the encoder
// that calls a MarshalJSON escapes its output, or not, as it was asked.
func marshalUnescaped(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// withAnswerField appends "field": answer to the JSON object b, when there
// is an answer and a field (a classifier's answer field, which needs no
// escaping: classifier.answerFieldPattern).
func withAnswerField(b []byte, field string, answer *bool) []byte {
	if answer == nil || field == "" || len(b) < 2 {
		return b
	}
	b = append(b[:len(b)-1], `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = strconv.AppendBool(b, *answer)
	return append(b, '}')
}

// Provenance is what an answer was based on. A model's answer has the
// model, the prompt version, the search provider and what the model was
// shown (a cached answer, those of the call that made it); an override's
// answer has who set it (SetBy) and why (Note). An answer that neither made
// (from the known list of old, or failed before any call) has none.
// Evidence is left out of an answer no model made, where a model's answer
// from no pages has it empty.
type Provenance struct {
	Model         string         `json:"model,omitempty"`
	PromptVersion string         `json:"prompt_version,omitempty"`
	Search        string         `json:"search,omitempty"`
	Evidence      []EvidenceItem `json:"evidence,omitzero"`
	SetBy         string         `json:"set_by,omitempty"`
	Note          string         `json:"note,omitempty"`
}

// EvidenceItem is one page the model was shown: {"url", "title",
// "snippet"}. The pipeline's own type, whose JSON is this shape, so that a
// streamed list row shows its evidence without a copy.
type EvidenceItem = classifier.EvidenceItem

// NewProvenance returns r's provenance as callers see it.
func NewProvenance(r classifier.Result) Provenance {
	if r.SetBy != "" {
		return Provenance{SetBy: r.SetBy, Note: r.Note}
	}
	if r.ProvenanceID == uuid.Nil && r.Model == "" {
		return Provenance{}
	}
	p := Provenance{Model: r.Model, PromptVersion: r.PromptVersion, Search: r.Search, Evidence: r.Evidence}
	if p.Evidence == nil {
		p.Evidence = []EvidenceItem{} // a model's answer from no pages
	}
	return p
}

// NewJobReport returns job j as callers see it; answerField is its
// classifier's (Registry.AnswerField).
func NewJobReport(j *classifier.Job, answerField string) JobReport {
	rep := JobReport{
		JobID:       j.ID.String(),
		Classifier:  j.Classifier,
		Status:      j.Status,
		Error:       j.Error,
		CreatedAt:   j.CreatedAt.UTC(),
		CompletedAt: utc(j.CompletedAt),
		Progress:    Progress{Total: len(j.Domains), Done: j.Done()},
		Results:     make([]ResultReport, len(j.Domains)),
	}
	for i, d := range j.Domains {
		rep.Results[i] = NewResultReport(d.Result, answerField)
	}
	return rep
}

// NewResultReport returns one answer as callers see it: the verdict only
// when COMPLETED, the error only when FAILED. answerField is the
// classifier's (Registry.AnswerField).
func NewResultReport(r classifier.Result, answerField string) ResultReport {
	rr := ResultReport{Domain: r.Domain, Status: r.Status, Source: r.Source, Error: r.Error, Provenance: NewProvenance(r),
		AnswerField: answerField}
	if r.Status == classifier.StatusCompleted {
		answer, confidence := r.Answer, r.Confidence
		rr.Answer, rr.Confidence, rr.Reasoning = &answer, &confidence, r.Reasoning
	}
	if !r.ClassifiedAt.IsZero() {
		rr.ClassifiedAt = utc(&r.ClassifiedAt)
	}
	return rr
}

// EventClassificationCompleted is the type of the webhook sent when a job
// ends, COMPLETED or FAILED.
const EventClassificationCompleted = "classification.completed"

// WebhookPayload is the body of a webhook delivery: the job exactly as GET
// /domains/classify/{id} shows it, plus the event type and the time of the
// event (when the job ended).
type WebhookPayload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	JobReport
	// Omitted says what was left out to keep the body under the bound of
	// a delivery (OmittedEvidence, OmittedResults); "" when nothing was.
	Omitted string `json:"omitted,omitempty"`
}

// What a delivery too large to send whole leaves out (WebhookPayload.Omitted).
const (
	// OmittedEvidence: every result's evidence.
	OmittedEvidence = "evidence"
	// OmittedResults: the results (the list is empty); progress and status
	// remain.
	OmittedResults = "results"
)

// Problem is an RFC 9457 problem details document, the body of every error
// answer (Content-Type application/problem+json).
type Problem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail,omitempty"`
	Errors []ItemError `json:"errors,omitempty"`
}

// ItemError says why one input was rejected; Row is its row in a list
// (no-valid-rows), 0 for a job's input.
type ItemError struct {
	Row    int    `json:"row,omitempty"`
	Input  string `json:"input"`
	Reason string `json:"reason"`
}

// ItemErrors converts rejected inputs to their wire form.
func ItemErrors(items []classifier.ItemError) []ItemError {
	if items == nil {
		return nil
	}
	out := make([]ItemError, len(items))
	for i, it := range items {
		out[i] = ItemError{Input: it.Input, Reason: it.Reason}
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
