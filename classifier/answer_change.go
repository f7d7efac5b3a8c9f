package classifier

import (
	"time"

	"github.com/google/uuid"
)

// Causes of an AnswerChange.
const (
	// CauseRefresh: a model's new answer replaced a COMPLETED one.
	CauseRefresh = "refresh"
	// CauseOverride: an operator set, replaced or deleted an override.
	CauseOverride = "override"
	// CauseReview: a reviewer's verdict (an override set in review).
	CauseReview = "review"
)

// AnswerChange is one change of the answer served for (Classifier,
// Domain): its yes/no went from Old to New. Callers that received the
// old answer are told (answer.changed).
type AnswerChange struct {
	// ID names the change (the same in GET /domains/changes and in its
	// webhooks); Seq is its place in the published order, 0 until the
	// fan-out publishes it.
	ID, Seq    int64
	Classifier string
	Domain     string
	Cause      string
	ChangedAt  time.Time
	Old, New   AnswerState
}

// AnswerState is an answer as it was served: its yes/no, its confidence
// and the record of how it was made (a model call or an override).
type AnswerState struct {
	Answer       *bool
	Confidence   *int
	ProvenanceID *uuid.UUID
}
