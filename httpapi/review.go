package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// ReviewPrefix is where the review page and its JSON actions are mounted,
// for operators only (issue 39).
const ReviewPrefix = "/review"

// mountReview serves the review page and its JSON actions behind the
// operators' credentials (River UI's), and refuses changes sent by another
// site's page, as River UI does.
func (s *Server) mountReview(r *gin.Engine) {
	g := r.Group(ReviewPrefix, s.operatorAuth, sameOrigin)
	g.GET("", s.reviewPage)
	g.GET("/next", s.reviewNext)
	g.POST("/items/:item_id/verdict", s.reviewVerdict)
	g.POST("/undo", s.reviewUndo)
	g.GET("/stats", s.reviewStats)
	g.GET("/rules", s.reviewRules)
	for name := range reviewAssets {
		g.GET("/"+name, reviewAsset(name))
	}
}

// reviewerKey is the gin key of the operator a review request is from.
const reviewerKey = "reviewer"

// openReviewer is who reviews when the operators' pages are open (AUTH=off
// without operator credentials: local use).
const openReviewer = "operator"

// operatorAuth lets through the operators: the user and password of River
// UI, by HTTP Basic authentication, whose user name is the reviewer's; or
// anyone when neither is set (AUTH=off, as River UI).
func (s *Server) operatorAuth(c *gin.Context) {
	user, pass, ok := c.Request.BasicAuth()
	if s.cfg.RiverUIUser == "" && s.cfg.RiverUIPassword == "" {
		reviewer := openReviewer
		if ok && classifier.FoldLine(user) != "" {
			reviewer = classifier.Truncate(classifier.FoldLine(user), 100)
		}
		c.Set(reviewerKey, reviewer)
		c.Next()
		return
	}
	if !ok || !equal(user, s.cfg.RiverUIUser) || !equal(pass, s.cfg.RiverUIPassword) {
		c.Header("WWW-Authenticate", `Basic realm="domainclass operators", charset="UTF-8"`)
		writeProblem(c, http.StatusUnauthorized, "unauthorized",
			"Review is for operators: send River UI's user name and password (RIVERUI_USER, RIVERUI_PASSWORD).", nil)
		return
	}
	c.Set(reviewerKey, user)
	c.Next()
}

func reviewerOf(c *gin.Context) string { return c.GetString(reviewerKey) }

// reviewClassifier is the ?classifier= of a review request, the default
// classifier when absent.
func (s *Server) reviewClassifier(c *gin.Context) (*classifier.Classifier, error) {
	name := classifier.DefaultClassifier
	if v, ok := c.GetQuery("classifier"); ok {
		name = v
	}
	return s.cfg.Registry.Get(name)
}

// reviewEvidence is one page the model was shown.
type reviewEvidence struct {
	URL     string `json:"url"`
	Title   string `json:"title"`
	Snippet string `json:"snippet"`
}

// reviewItem is an answer to review as the page and other tools see it.
type reviewItem struct {
	ID            int64            `json:"id"`
	Classifier    string           `json:"classifier"`
	Domain        string           `json:"domain"`
	URL           string           `json:"url"`
	Reasons       []string         `json:"reasons"`
	Answer        bool             `json:"answer"`
	Confidence    int              `json:"confidence"`
	Reasoning     string           `json:"reasoning"`
	Source        string           `json:"source"`
	AnsweredAt    time.Time        `json:"answered_at"`
	Model         string           `json:"model"`
	PromptVersion string           `json:"prompt_version"`
	Search        string           `json:"search"`
	Evidence      []reviewEvidence `json:"evidence"`
	QueuedAt      time.Time        `json:"queued_at"`
	Disputes      []string         `json:"disputes"`
}

func newReviewItem(it classifier.ReviewItem) *reviewItem {
	out := &reviewItem{ID: it.ID, Classifier: it.Classifier, Domain: it.Domain, URL: "https://" + it.Domain,
		Reasons: it.Reasons, Answer: it.Answer, Confidence: it.Confidence, Reasoning: it.Reasoning,
		Source: string(it.Source), AnsweredAt: it.AnsweredAt.UTC(), Model: it.Model, PromptVersion: it.PromptVersion,
		Search: it.Search, Evidence: []reviewEvidence{}, QueuedAt: it.QueuedAt.UTC(), Disputes: it.Disputes}
	if out.Disputes == nil {
		out.Disputes = []string{}
	}
	for _, e := range it.Evidence {
		out.Evidence = append(out.Evidence, reviewEvidence(e))
	}
	return out
}

// reviewQueue is GET /review/next's answer, and what a verdict and an
// undo answer too: the next item (null when the queue is empty), the
// queue's depth and the reviewer's count.
type reviewQueue struct {
	Classifier string      `json:"classifier"`
	Question   string      `json:"question"`
	Reviewer   string      `json:"reviewer"`
	Queued     int         `json:"queued"`
	Reviewed   int         `json:"reviewed"`
	Item       *reviewItem `json:"item"`
}

// maxExclude bounds ?exclude=: a page shows one item and fetches the next.
const maxExclude = 20

// reviewNext handles GET /review/next: the next queued item of a
// classifier, leaving out those of ?exclude= (ids, comma-separated: the
// page asks for the one after the one it shows).
func (s *Server) reviewNext(c *gin.Context) {
	cls, err := s.reviewClassifier(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	var exclude []int64
	if v := c.Query("exclude"); v != "" {
		for part := range strings.SplitSeq(v, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
			if err != nil || len(exclude) == maxExclude {
				s.writeError(c, &problem{status: http.StatusBadRequest, slug: "invalid-query",
					detail: fmt.Sprintf("exclude must be up to %d item ids separated by commas.", maxExclude)})
				return
			}
			exclude = append(exclude, id)
		}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	q, err := s.reviewQueueOf(ctx, s.pool(), cls, reviewerOf(c), exclude)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, q)
}

// reviewQueueOf is the queue as a reviewer sees it.
func (s *Server) reviewQueueOf(ctx context.Context, b db.Bounded, cls *classifier.Classifier, reviewer string, exclude []int64) (reviewQueue, error) {
	q := reviewQueue{Classifier: cls.Name, Question: cls.Description, Reviewer: reviewer}
	tx, err := db.Begin(ctx, b)
	if err != nil {
		return q, err
	}
	defer db.Rollback(ctx, tx)
	if q.Queued, q.Reviewed, err = db.ReviewCounts(ctx, tx, cls.Name, reviewer); err != nil {
		return q, err
	}
	it, err := db.ReviewNext(ctx, tx, cls.Name, exclude)
	switch {
	case errors.Is(err, db.ErrNotFound):
	case err != nil:
		return q, err
	default:
		q.Item = newReviewItem(it)
	}
	return q, nil
}

// verdictRequest is POST /review/items/{item_id}/verdict's body.
type verdictRequest struct {
	Verdict string `json:"verdict"`
	Note    string `json:"note"`
}

// reviewVerdictResult is a verdict's or an undo's answer.
type reviewVerdictResult struct {
	ItemID int64 `json:"item_id"`
	// Verdict is yes, no or skip; an undo's is what it took back: verdict
	// or skip.
	Verdict  string `json:"verdict"`
	Domain   string `json:"domain"`
	Queued   int    `json:"queued"`
	Reviewed int    `json:"reviewed"`
	// Item is an undo's item, queued again (the page shows it at once).
	Item *reviewItem `json:"item,omitempty"`
}

// maxNoteBytes bounds a note (a verdict's, a dispute's): one line.
const maxNoteBytes = 1000

// reviewVerdict handles POST /review/items/{item_id}/verdict: yes or no
// sets the domain's override to the verdict (by the reviewer, with the
// note) and marks the item reviewed; skip sends it to the back of the
// queue.
func (s *Server) reviewVerdict(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("item_id"), 10, 64)
	if err != nil || id <= 0 {
		s.writeError(c, &problem{status: http.StatusNotFound, slug: "not-found", detail: "No such review item."})
		return
	}
	var req verdictRequest
	if err := readJSONObject(c, &req, "verdict", "note"); err != nil {
		s.writeError(c, err)
		return
	}
	var verdict *bool
	switch req.Verdict {
	case "yes", "no":
		v := req.Verdict == "yes"
		verdict = &v
	case "skip":
	default:
		s.writeError(c, invalidJSON(fmt.Sprintf("verdict must be yes, no or skip, not %q.", classifier.Truncate(req.Verdict, 20))))
		return
	}
	note := classifier.FoldLine(req.Note)
	if len(note) > maxNoteBytes {
		s.writeError(c, invalidJSON(fmt.Sprintf("The note is longer than %d bytes.", maxNoteBytes)))
		return
	}
	reviewer := reviewerOf(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)
	err = db.ReviewVerdict(ctx, tx, id, verdict, note, reviewer)
	if errors.Is(err, db.ErrNotFound) {
		err = &problem{status: http.StatusNotFound, slug: "not-found", detail: "No such review item."}
	} else if errors.Is(err, db.ErrConflict) {
		err = &problem{status: http.StatusConflict, slug: "already-reviewed",
			detail: "This item was reviewed already (by another reviewer, or in another tab); fetch the next one."}
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	s.answerReviewAction(c, ctx, tx, id, req.Verdict, reviewer, false)
}

// answerReviewAction commits a verdict's or an undo's transaction and
// answers with the queue's depth and the reviewer's count.
func (s *Server) answerReviewAction(c *gin.Context, ctx context.Context, tx pgx.Tx, id int64, verdict, reviewer string, withItem bool) {
	var cls, domain string
	it, err := db.ReviewItemGet(ctx, tx, id)
	if err == nil {
		cls, domain = it.Classifier, it.Domain
	}
	out := reviewVerdictResult{ItemID: id, Verdict: verdict, Domain: domain}
	if err == nil && withItem {
		out.Item = newReviewItem(it)
	}
	if err == nil {
		out.Queued, out.Reviewed, err = db.ReviewCounts(ctx, tx, cls, reviewer)
	}
	if err == nil {
		err = db.Commit(ctx, tx)
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// reviewUndo handles POST /review/undo: the reviewer's last verdict or skip
// not undone yet is taken back (the override it replaced is back) and its
// item is queued again.
func (s *Server) reviewUndo(c *gin.Context) {
	reviewer := reviewerOf(c)
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	tx, err := db.Begin(ctx, s.pool())
	if err != nil {
		s.writeError(c, err)
		return
	}
	defer db.Rollback(ctx, tx)
	id, action, err := db.ReviewUndo(ctx, tx, reviewer)
	if errors.Is(err, db.ErrNotFound) {
		err = &problem{status: http.StatusNotFound, slug: "not-found", detail: "You have no verdict or skip left to undo."}
	} else if errors.Is(err, db.ErrConflict) {
		err = &problem{status: http.StatusConflict, slug: "override-changed",
			detail: "The override your verdict set was changed since (by an operator or another verdict); undoing would lose that."}
	}
	if err != nil {
		s.writeError(c, err)
		return
	}
	s.answerReviewAction(c, ctx, tx, id, action, reviewer, true)
}

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

// readJSONObject reads a JSON body of at most MaxBodyBytes: one object of
// the named fields, each at most once, with the right types.
func readJSONObject(c *gin.Context, dst any, fields ...string) error {
	if err := jsonContentType(c.GetHeader("Content-Type")); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			return &problem{status: http.StatusRequestEntityTooLarge, slug: "body-too-large",
				detail: fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes)}
		}
		return invalidJSON("The request body could not be read.")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return invalidJSON("The request body must be a JSON object.")
	}
	if err := checkKeys(trimmed, fields...); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(dst); err != nil {
		return invalidJSON(fmt.Sprintf("The request body is not valid JSON: %v.", err))
	}
	if dec.More() {
		return invalidJSON("The request body has data after the JSON object.")
	}
	return nil
}
