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
