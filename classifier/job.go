package classifier

import (
	"time"

	"github.com/google/uuid"
)

// Job is a caller's request: one classifier over a list of domains.
type Job struct {
	ID          uuid.UUID
	Caller      string
	Classifier  string
	Status      Status
	Error       string
	CallbackURL string
	RiverJobID  int64
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
	Domains     []JobDomain
}

// JobDomain is one domain of a job and, once final, this job's answer.
type JobDomain struct {
	Position int
	Input    string
	Result   Result // Status PENDING until answered
}

// Done counts the domains that are final.
func (j *Job) Done() int {
	n := 0
	for _, d := range j.Domains {
		if d.Result.Final() {
			n++
		}
	}
	return n
}

// JobReport is a job as callers see it, from GET /domains/classify/{id} and
// in webhook deliveries.
type JobReport struct {
	JobID       string         `json:"job_id"`
	Classifier  string         `json:"classifier"`
	Status      Status         `json:"status"`
	Error       string         `json:"error,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	CompletedAt *time.Time     `json:"completed_at"`
	Progress    Progress       `json:"progress"`
	Results     []ResultReport `json:"results"`
}

// Progress counts a job's final domains.
type Progress struct {
	Total int `json:"total"`
	Done  int `json:"done"`
}

// ResultReport is one domain's answer as callers see it.
type ResultReport struct {
	Domain       string     `json:"domain"`
	Status       Status     `json:"status"`
	IsCPG        *bool      `json:"is_cpg,omitempty"`
	Confidence   *int       `json:"confidence,omitempty"`
	Reasoning    string     `json:"reasoning,omitempty"`
	Source       Source     `json:"source,omitempty"`
	ClassifiedAt *time.Time `json:"classified_at,omitempty"`
	Error        string     `json:"error,omitempty"`
}

// Report returns the job as callers see it.
func (j *Job) Report() JobReport {
	rep := JobReport{
		JobID:      j.ID.String(),
		Classifier: j.Classifier,
		Status:     j.Status,
		Error:      j.Error,
		CreatedAt:  j.CreatedAt.UTC(),
		Progress:   Progress{Total: len(j.Domains), Done: j.Done()},
		Results:    make([]ResultReport, len(j.Domains)),
	}
	if j.CompletedAt != nil {
		t := j.CompletedAt.UTC()
		rep.CompletedAt = &t
	}
	for i, d := range j.Domains {
		r := d.Result
		rr := ResultReport{Domain: r.Domain, Status: r.Status, Source: r.Source, Error: r.Error}
		if r.Status == StatusCompleted {
			answer, confidence := r.Answer, r.Confidence
			rr.IsCPG, rr.Confidence, rr.Reasoning = &answer, &confidence, r.Reasoning
		}
		if !r.ClassifiedAt.IsZero() {
			t := r.ClassifiedAt.UTC()
			rr.ClassifiedAt = &t
		}
		rep.Results[i] = rr
	}
	return rep
}
