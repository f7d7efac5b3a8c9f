package classifier

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Status is the state of one domain's answer, or of a job.
type Status string

// Domain, row, job and list statuses, as callers see them.
const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING" // jobs and lists
	StatusCompleted Status = "COMPLETED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED" // lists, and their rows not final when cancelled
	StatusRejected  Status = "REJECTED"  // list rows that are not a domain
)

// Source says where an answer came from, cheapest first.
type Source string

// Answer sources.
const (
	SourceOverride Source = "override" // an operator's override
	SourceCache    Source = "cache"    // an earlier answer that is still fresh
	SourceLLM      Source = "llm"      // a fresh web search and model call
	// SourceKnown is the source of answers made from the known-companies
	// list before overrides replaced it; rows answered then keep it.
	SourceKnown Source = "known"
)

// Result is the answer for one domain under one classifier. A FAILED result
// carries Error and never counts as cached.
type Result struct {
	Domain       string
	Classifier   string
	Status       Status
	Answer       bool
	Confidence   int
	Reasoning    string
	Source       Source
	Error        string
	ClassifiedAt time.Time

	// Provenance: what a model's answer was based on (a cached answer keeps
	// that of the call that made it), or who set an override's answer and
	// why. ProvenanceID names the stored record of it; zero until the
	// answer is stored, and for answers that have none.
	ProvenanceID  uuid.UUID
	Model         string
	PromptVersion string
	Search        string         // the search provider
	Evidence      []EvidenceItem // what the model was shown
	SetBy         string         // who set an override
	Note          string         // the override's note
	// Usage is set for answers that called the model in this run.
	Usage *Usage
	// BatchID names the provider batch an answer came by (economy tier).
	BatchID string
}

// Usage is the cost of one model call.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	Latency          time.Duration
	Raw              string // the model's raw output, for evals and debugging
	// CostUSD is the call's price from the price table (0 when the model
	// is not in it).
	CostUSD float64
}

// Cost is the call's price; 0 for no call.
func (u *Usage) Cost() float64 {
	if u == nil {
		return 0
	}
	return u.CostUSD
}

// Final reports whether the result needs no more work.
func (r Result) Final() bool {
	return r.Status == StatusCompleted || r.Status == StatusFailed
}

// ErrBusy is returned when another worker is already asking the model about
// a domain and did not finish within the wait. The domain is not failed: the
// job comes back for it shortly, and by then the answer is usually cached.
var ErrBusy = errors.New("another worker is classifying this domain")

// BusyError is ErrBusy with when to look again: a domain held by a
// provider batch is not waited for by a worker (the batch answers within
// its window, up to a day), so the job sleeps until the batch's claim may
// be taken over (see Pipeline.claim). Wait 0 leaves it to the job's own
// snooze.
type BusyError struct {
	Domain string
	Wait   time.Duration
	// Batch: the domain is held by a provider batch.
	Batch bool
}

func (e *BusyError) Error() string {
	if e.Batch {
		return fmt.Sprintf("%s is staged in another list's provider batch", e.Domain)
	}
	return ErrBusy.Error()
}

// Is makes a BusyError ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// BusyFor returns how long a busy domain's job should sleep before it
// looks again (0: its own snooze), and whether err is ErrBusy at all.
func BusyFor(err error) (time.Duration, bool) {
	var b *BusyError
	if errors.As(err, &b) {
		return b.Wait, true
	}
	return 0, errors.Is(err, ErrBusy)
}

// RetryAfter reports whether err is a provider's request to slow down, and
// for how long. Such errors are not failures: the domain is tried again
// after the wait without using up an attempt.
func RetryAfter(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	return 0, false
}

// IsPermanent reports whether err will not go away by asking again (a bad
// request, a refusal, unreadable output). The domain is then FAILED.
func IsPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}
