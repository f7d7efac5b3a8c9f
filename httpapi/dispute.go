package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// disputeRequest is POST /domains/{domain}/disputes's body.
type disputeRequest struct {
	Classifier *string `json:"classifier"`
	Note       string  `json:"note"`
}

// disputeView is a dispute as its caller sees it.
type disputeView struct {
	ID         int64     `json:"id"`
	Classifier string    `json:"classifier"`
	Domain     string    `json:"domain"`
	Answer     bool      `json:"answer"`
	Confidence int       `json:"confidence"`
	Source     string    `json:"source"`
	Note       string    `json:"note"`
	CreatedAt  time.Time `json:"created_at"`
	// Review is queued until a reviewer's verdict, then reviewed.
	Review string `json:"review"`
}

// disputeCreate handles POST /domains/{domain}/disputes: the caller
// disputes the answer the domain is served now; the answer is queued for
// review at once. 201 for a new dispute, 200 with the same dispute when
// the caller disputed this answer before.
func (s *Server) disputeCreate(c *gin.Context) {
	domain, err := classifier.NormalizeDomain(c.Param("domain"))
	if err != nil {
		s.writeError(c, &problem{status: http.StatusBadRequest, slug: "invalid-domains", detail: err.Error()})
		return
	}
	var req disputeRequest
	if err := readJSONObject(c, &req, "classifier", "note"); err != nil {
		s.writeError(c, err)
		return
	}
	name := classifier.DefaultClassifier
	if req.Classifier != nil {
		name = *req.Classifier
	}
	cls, err := s.cfg.Registry.Get(name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	note := classifier.FoldLine(req.Note)
	switch {
	case note == "":
		s.writeError(c, invalidJSON("A dispute needs a note: what is wrong with the answer."))
		return
	case len(note) > maxNoteBytes:
		s.writeError(c, invalidJSON(fmt.Sprintf("The note is longer than %d bytes.", maxNoteBytes)))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)
	d, created, err := db.ReviewDispute(ctx, tx, callerOf(c).Name, cls.Name, domain, note)
	if errors.Is(err, db.ErrNotFound) {
		err = &problem{status: http.StatusNotFound, slug: "not-found",
			detail: fmt.Sprintf("%s has no answer for %s to dispute: classify it first.", domain, cls.Name)}
	}
	if err == nil {
		err = db.Commit(ctx, tx)
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	view := disputeView{ID: d.ID, Classifier: cls.Name, Domain: domain, Answer: d.Item.Answer, Confidence: d.Item.Confidence,
		Source: string(d.Item.Source), Note: d.Note, CreatedAt: d.CreatedAt.UTC(), Review: "queued"}
	if d.Item.Verdict != nil {
		view.Review = "reviewed"
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, view)
}
