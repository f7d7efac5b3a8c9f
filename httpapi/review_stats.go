package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// reviewAgreement is the agreement of a group of reviewed answers, with
// its 95% Wilson interval.
type reviewAgreement struct {
	Reviewed  int      `json:"reviewed"`
	Agreed    int      `json:"agreed"`
	Agreement *float64 `json:"agreement"` // null when none was reviewed
	Low       *float64 `json:"low"`
	High      *float64 `json:"high"`
}

func newReviewAgreement(t classifier.ReviewTally) reviewAgreement {
	a := reviewAgreement{Reviewed: t.Reviewed, Agreed: t.Agreed}
	if t.Reviewed > 0 {
		share, low, high := t.Agreement()
		a.Agreement, a.Low, a.High = &share, &low, &high
	}
	return a
}

type reviewQueueAgreement struct {
	Queue string `json:"queue"`
	reviewAgreement
}

type reviewConfidenceAgreement struct {
	Confidence int `json:"confidence"`
	reviewAgreement
}

// reviewStatRow is one classifier × model × prompt version's agreement.
type reviewStatRow struct {
	Classifier    string                      `json:"classifier"`
	Model         string                      `json:"model"`
	PromptVersion string                      `json:"prompt_version"`
	Audit         reviewAgreement             `json:"audit"`
	Queues        []reviewQueueAgreement      `json:"queues"`
	Confidence    []reviewConfidenceAgreement `json:"confidence"`
}

// reviewStats handles GET /review/stats: for each classifier, model and
// prompt version, the agreement of the model with the reviewers on the
// audit sample (the unbiased estimate of its accuracy), on each queue and
// by the model's confidence. ?classifier= keeps one classifier's.
func (s *Server) reviewStats(c *gin.Context) {
	name := ""
	if v, ok := c.GetQuery("classifier"); ok {
		cls, err := s.cfg.Registry.Get(v)
		if err != nil {
			s.writeError(c, err)
			return
		}
		name = cls.Name
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	stats, err := db.ReviewStats(ctx, s.pool().Pool, name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"stats": newReviewStatRows(stats)})
}

func newReviewStatRows(stats []classifier.ReviewStat) []reviewStatRow {
	rows := make([]reviewStatRow, 0, len(stats))
	for _, st := range stats {
		row := reviewStatRow{Classifier: st.Classifier, Model: st.Model, PromptVersion: st.PromptVersion,
			Audit: newReviewAgreement(st.Audit), Queues: []reviewQueueAgreement{}, Confidence: []reviewConfidenceAgreement{}}
		for _, q := range classifier.ReviewReasons {
			if t, ok := st.Queues[q]; ok {
				row.Queues = append(row.Queues, reviewQueueAgreement{Queue: q, reviewAgreement: newReviewAgreement(t)})
			}
		}
		for conf := 1; conf <= 5; conf++ {
			if t, ok := st.Confidence[conf]; ok {
				row.Confidence = append(row.Confidence, reviewConfidenceAgreement{Confidence: conf, reviewAgreement: newReviewAgreement(t)})
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// reviewRule is a classifier's review rules as GET /review/rules shows them.
type reviewRule struct {
	Classifier    string     `json:"classifier"`
	LowConfidence int        `json:"low_confidence"`
	AuditRate     float64    `json:"audit_rate"`
	UpdatedBy     string     `json:"updated_by"`
	UpdatedAt     *time.Time `json:"updated_at"` // null while the defaults hold
}

// reviewRules handles GET /review/rules: what fills each classifier's
// queue (`domainclass review rules` changes them).
func (s *Server) reviewRules(c *gin.Context) {
	names := s.cfg.Registry.Names()
	if v, ok := c.GetQuery("classifier"); ok {
		cls, err := s.cfg.Registry.Get(v)
		if err != nil {
			s.writeError(c, err)
			return
		}
		names = []string{cls.Name}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	rules, err := db.ReviewRulesGet(ctx, s.pool().Pool, names)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]reviewRule, len(rules))
	for i, r := range rules {
		out[i] = reviewRule{Classifier: r.Classifier, LowConfidence: r.LowConfidence, AuditRate: r.AuditRate, UpdatedBy: r.UpdatedBy}
		if r.UpdatedBy != "" {
			at := r.UpdatedAt.UTC()
			out[i].UpdatedAt = &at
		}
	}
	c.JSON(http.StatusOK, gin.H{"rules": out})
}
