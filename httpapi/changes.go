package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// changesLimit is the page size of GET /domains/changes when ?limit is not
// given; changesMaxLimit the largest one may ask for (a change is a few
// hundred bytes).
const (
	changesLimit    = 100
	changesMaxLimit = 1000
)

// changesIndex handles GET /domains/changes: a classifier's answers that
// changed (by refresh, override or review), in the order they were
// published, a page at a time after ?since= (the next_cursor of the page
// before). Answers are shared by every caller, so any caller reads every
// change of a classifier.
func (s *Server) changesIndex(c *gin.Context) {
	q := c.Request.URL.Query()
	name := cmp.Or(firstOf(q["classifier"]), classifier.DefaultClassifier)
	if _, err := s.cfg.Registry.Get(name); err != nil {
		s.writeError(c, err)
		return
	}
	limit, err := changesPageLimit(firstOf(q["limit"]))
	if err != nil {
		s.writeError(c, err)
		return
	}
	after, err := decodeChangeCursor(firstOf(q["since"]))
	if err != nil {
		s.writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	cs, err := db.AnswerChangesAfter(ctx, s.cfg.DB.Pool, name, after, limit)
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := wire.AnswerChanges{Changes: make([]wire.AnswerChange, 0, len(cs))}
	for _, ch := range cs {
		out.Changes = append(out.Changes, wire.NewAnswerChange(ch))
		after = ch.Seq
	}
	out.NextCursor = encodeChangeCursor(after)
	next := url.Values{"classifier": {name}, "since": {out.NextCursor}}
	if l := firstOf(q["limit"]); l != "" {
		next.Set("limit", l)
	}
	out.Next = "/domains/changes?" + next.Encode()
	c.JSON(http.StatusOK, out)
}

func changesPageLimit(v string) (int, error) {
	if v == "" {
		return changesLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > changesMaxLimit {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: "limit must be a number from 1 to " + strconv.Itoa(changesMaxLimit) + ", not " + strconv.Quote(classifier.Truncate(v, 40)) + "."}
	}
	return n, nil
}

// A change cursor is the published place (seq) of the last change a page
// held, opaque to callers: "c" and the number, base64url. Empty is the
// start of the log.
func encodeChangeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c" + strconv.FormatInt(seq, 10)))
}

func decodeChangeCursor(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	bad := &problem{status: http.StatusBadRequest, slug: "invalid-query",
		detail: "since must be a next_cursor this API gave; start without one."}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, bad
	}
	n, ok := strings.CutPrefix(string(b), "c")
	if !ok {
		return 0, bad
	}
	seq, err := strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 {
		return 0, bad
	}
	return seq, nil
}
