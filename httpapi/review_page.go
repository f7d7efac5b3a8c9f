package httpapi

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// reviewFS is the review page: its template, script and style, served by
// this process alone (no build step, nothing from another origin).
//
//go:embed review/review.html review/review.js review/review.css
var reviewFS embed.FS

var reviewTemplate = template.Must(template.New("review.html").Funcs(template.FuncMap{"join": strings.Join}).
	ParseFS(reviewFS, "review/review.html"))

// reviewCSP lets the page load its own script and style and talk to its
// own origin, and nothing else: no inline script, no other origin, no
// frames, no forms (the page posts with fetch).
const reviewCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// reviewAssets are the files the page loads, under /review/.
var reviewAssets = map[string]string{
	"review.js":  "text/javascript; charset=utf-8",
	"review.css": "text/css; charset=utf-8",
}

// reviewPage handles GET /review: the review page of ?classifier= (the
// default classifier), with the queue's first item rendered; its script
// takes over from there.
func (s *Server) reviewPage(c *gin.Context) {
	cls, err := s.reviewClassifier(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	q, err := s.reviewQueueOf(ctx, s.pool(), cls, reviewerOf(c), nil)
	if err != nil {
		s.writeError(c, err)
		return
	}
	var buf bytes.Buffer
	if err := reviewTemplate.Execute(&buf, struct {
		Queue       reviewQueue
		Classifiers []string
	}{q, s.cfg.Registry.Names()}); err != nil {
		s.writeError(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", reviewCSP)
	h.Set("Referrer-Policy", "no-referrer")
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// reviewAsset handles GET /review/review.js and /review/review.css.
func reviewAsset(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		b, err := reviewFS.ReadFile("review/" + name)
		if err != nil {
			writeProblem(c, http.StatusNotFound, "not-found", "No such file.", nil)
			return
		}
		c.Header("Content-Security-Policy", reviewCSP)
		c.Data(http.StatusOK, reviewAssets[name], b)
	}
}
