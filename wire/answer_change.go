package wire

import (
	"time"

	"github.com/domainclass/domainclass/classifier"
)

// AnswerChange is one change of a served answer, as GET /domains/changes
// lists it and an answer.changed webhook carries it.
type AnswerChange struct {
	// ID names the change: the same in the list and in every webhook of it.
	ID         int64       `json:"id"`
	Classifier string      `json:"classifier"`
	Domain     string      `json:"domain"`
	Cause      string      `json:"cause"` // refresh, override or review
	ChangedAt  time.Time   `json:"changed_at"`
	Old        AnswerState `json:"old"`
	New        AnswerState `json:"new"`
}

// AnswerState is an answer as it was served. ProvenanceID is the
// provenance_id the results that got it show (a job's or a list's rows).
type AnswerState struct {
	Answer       *bool   `json:"answer"`
	Confidence   *int    `json:"confidence"`
	ProvenanceID *string `json:"provenance_id"`
}

// NewAnswerChange is the wire form of c.
func NewAnswerChange(c classifier.AnswerChange) AnswerChange {
	state := func(s classifier.AnswerState) AnswerState {
		out := AnswerState{Answer: s.Answer, Confidence: s.Confidence}
		if s.ProvenanceID != nil {
			id := s.ProvenanceID.String()
			out.ProvenanceID = &id
		}
		return out
	}
	return AnswerChange{ID: c.ID, Classifier: c.Classifier, Domain: c.Domain, Cause: c.Cause,
		ChangedAt: c.ChangedAt.UTC(), Old: state(c.Old), New: state(c.New)}
}

// AnswerChanges is the answer to GET /domains/changes: a page of a
// classifier's changes, oldest first. NextCursor always continues after
// this page (from where the last page stopped when this one is empty), and
// Next is the request that asks for it: the list is followed by polling.
type AnswerChanges struct {
	Changes    []AnswerChange `json:"changes"`
	NextCursor string         `json:"next_cursor"`
	Next       string         `json:"next"`
}

// EventAnswerChanged is the type of the webhook sent to a job's or a
// list's callback URL when an answer it received changed.
const EventAnswerChanged = "answer.changed"

// AnswerChangedPayload is the body of an answer.changed webhook: the
// change, and the job or the list (one of the two) that received the old
// answer.
type AnswerChangedPayload struct {
	Type      string       `json:"type"`
	Timestamp time.Time    `json:"timestamp"`
	JobID     string       `json:"job_id,omitempty"`
	ListID    string       `json:"list_id,omitempty"`
	Change    AnswerChange `json:"change"`
}
