package classifier

import (
	"time"

	"github.com/google/uuid"
)

// Override is an operator's verdict on one domain under one classifier. It
// answers the domain before the cache and the model, for as long as it is
// set; the model's answers are kept apart and never replace it.
type Override struct {
	Classifier string
	Domain     string
	Answer     bool
	Confidence int
	Note       string // why, in one line
	SetBy      string // who set it
	SetAt      time.Time
	// ProvenanceID names the record of the override as it was set (who,
	// why, when), which the answers it gives point at: a job or list row
	// keeps it after the override is changed or deleted.
	ProvenanceID uuid.UUID
}

// Result returns the answer the override gives: made when it was set, its
// reasoning who set it and why.
func (o Override) Result() Result {
	return Result{
		Domain: o.Domain, Classifier: o.Classifier, Status: StatusCompleted, Answer: o.Answer, Confidence: o.Confidence,
		Reasoning: "Set by " + o.SetBy + ": " + o.Note, Source: SourceOverride, ClassifiedAt: o.SetAt.UTC(),
		ProvenanceID: o.ProvenanceID, SetBy: o.SetBy, Note: o.Note,
	}
}
