package classifier

import (
	"math"
	"time"

	"github.com/google/uuid"
)

// The default review rules of a classifier that has none set: answers with
// a confidence of 3 or less are reviewed, and 1% of the others as the
// audit sample (the database's defaults, db/migrations/00018_review.sql).
const (
	DefaultReviewLowConfidence = 3
	DefaultReviewAuditRate     = 0.01
)

// ReviewRules are what fills a classifier's review queue.
type ReviewRules struct {
	Classifier string
	// LowConfidence queues the model's answers with a confidence at or
	// below it (0: none).
	LowConfidence int
	// AuditRate is the share of the answers above LowConfidence queued
	// as the audit sample, drawn by a hash of the answer's provenance id.
	AuditRate float64
	UpdatedBy string // "" while the defaults hold
	UpdatedAt time.Time
}

// Why an answer is in the review queue.
const (
	ReviewLowConfidence = "low_confidence"
	ReviewChanged       = "changed" // a refresh changed the answer
	ReviewAudit         = "audit"   // the random sample of confident answers
	ReviewDisputed      = "disputed"
)

// ReviewReasons are the reasons an answer is queued, in the order the
// statistics show them.
var ReviewReasons = []string{ReviewAudit, ReviewLowConfidence, ReviewChanged, ReviewDisputed}

// ReviewItem is one answer to review, and its verdict once reviewed.
type ReviewItem struct {
	ID         int64
	Classifier string
	Domain     string
	// ProvenanceID names the answer: an answer reviewed once is not
	// queued again until it changes.
	ProvenanceID uuid.UUID
	Reasons      []string
	// The answer under review, as it was given.
	Answer        bool
	Confidence    int
	Reasoning     string
	Source        Source // llm, or override
	AnsweredAt    time.Time
	Model         string
	PromptVersion string
	Search        string
	Evidence      []EvidenceItem
	QueuedAt      time.Time
	Disputes      []string // the callers' notes, oldest first
	// The verdict, once reviewed.
	Verdict    *bool
	Note       string
	Reviewer   string
	ReviewedAt *time.Time
}

// ReviewDispute is a caller's dispute of an answer.
type ReviewDispute struct {
	ID        int64
	Item      ReviewItem // the disputed answer; Verdict set once reviewed
	Note      string
	CreatedAt time.Time
}

// ReviewTally is how often reviewers agreed with the model in a group of
// reviewed answers.
type ReviewTally struct {
	Reviewed, Agreed int
}

// Agreement is the share of the reviewed answers the reviewers agreed
// with, and its 95% Wilson score interval; all zero when none were
// reviewed.
func (t ReviewTally) Agreement() (share, low, high float64) {
	if t.Reviewed == 0 {
		return 0, 0, 0
	}
	low, high = Wilson(t.Agreed, t.Reviewed, 1.959963984540054)
	return float64(t.Agreed) / float64(t.Reviewed), low, high
}

// Wilson is the Wilson score interval of k successes in n trials at z
// standard deviations (1.96 for 95%): unlike the normal approximation it
// stays inside [0, 1] and is right for small n and shares near 0 or 1,
// which is where a good model's agreement is.
func Wilson(k, n int, z float64) (low, high float64) {
	if n <= 0 {
		return 0, 0
	}
	nf, p := float64(n), float64(k)/float64(n)
	z2 := z * z
	center := (p + z2/(2*nf)) / (1 + z2/nf)
	half := z / (1 + z2/nf) * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return math.Max(0, center-half), math.Min(1, center+half)
}

// ReviewStat is the agreement of one classifier's model and prompt version
// with the reviewers: on the audit sample (the unbiased estimate), on each
// queue, and by the model's confidence.
type ReviewStat struct {
	Classifier, Model, PromptVersion string
	Audit                            ReviewTally
	Queues                           map[string]ReviewTally // by reason
	Confidence                       map[int]ReviewTally
}
