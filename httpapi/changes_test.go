package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// publishChanges publishes the changes recorded so far, as the fan-out
// does, and returns how many.
func publishChanges(t *testing.T, d *db.DB) int {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	ids, err := db.AnswerChangesPublish(ctx, tx, 1000)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	return len(ids)
}

// overrideFlip answers domain yes from the model, then no by an override:
// one change.
func overrideFlip(t *testing.T, d *db.DB, domain string) {
	t.Helper()
	ctx := context.Background()
	_, err := d.Pool.Exec(ctx, `
		WITH p AS (INSERT INTO provenance (id, model) VALUES (gen_random_uuid(), 'm') RETURNING id)
		INSERT INTO result (domain, classifier, status, answer, confidence, provenance_id, classified_at)
		SELECT $1, 'cpg', 'COMPLETED', true, 3, id, now() FROM p`, domain)
	require.NoError(t, err)
	_, _, err = db.OverrideSet(ctx, d.Pool, []classifier.Override{{Classifier: "cpg", Domain: domain, Answer: false,
		Confidence: 5, Note: "A grocer.", SetBy: "alice"}})
	require.NoError(t, err)
}

// GET /domains/changes pages through every change once, in the order
// published, and a cursor kept from an empty page finds the changes
// published after it; any caller reads them.
func TestChanges_Pages(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	page := func(path string, key string) wire.AnswerChanges {
		t.Helper()
		r := b.do(t, "GET", path, "", "Authorization", "Bearer "+key)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var out wire.AnswerChanges
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out
	}
	for i := range 5 {
		overrideFlip(t, b.db, fmt.Sprintf("d%d.com", i))
	}
	require.Empty(t, page("/domains/changes", b.keyA).Changes, "nothing listed before it is published")
	require.Equal(t, 5, publishChanges(t, b.db))

	var domains []string
	next := "/domains/changes?limit=2"
	for range 10 {
		p := page(next, b.keyA)
		if len(p.Changes) == 0 {
			break
		}
		for _, c := range p.Changes {
			require.Equal(t, classifier.CauseOverride, c.Cause)
			require.Equal(t, []bool{true, false}, []bool{*c.Old.Answer, *c.New.Answer})
			domains = append(domains, c.Domain)
		}
		next = p.Next
	}
	require.Equal(t, []string{"d0.com", "d1.com", "d2.com", "d3.com", "d4.com"}, domains)

	// Polling from the last cursor: the change published next, by another
	// caller's key (answers are shared).
	last := page(next, b.keyB)
	require.Empty(t, last.Changes)
	overrideFlip(t, b.db, "d5.com")
	require.Equal(t, 1, publishChanges(t, b.db))
	p := page("/domains/changes?since="+last.NextCursor, b.keyB)
	require.Len(t, p.Changes, 1)
	require.Equal(t, "d5.com", p.Changes[0].Domain)

	// Refused: a cursor this API did not give, a limit out of range, a
	// classifier that does not exist, no key.
	for path, want := range map[string]int{
		"/domains/changes?since=MTIz":            http.StatusBadRequest, // base64 of "123", not a cursor
		"/domains/changes?since=Yy0x":            http.StatusBadRequest, // "c-1"
		"/domains/changes?since=!!":              http.StatusBadRequest,
		"/domains/changes?limit=0":               http.StatusBadRequest,
		"/domains/changes?limit=1001":            http.StatusBadRequest,
		"/domains/changes?classifier=nope":       http.StatusUnprocessableEntity,
		"/domains/changes?since=" + p.NextCursor: http.StatusOK,
	} {
		r := b.do(t, "GET", path, "")
		require.Equal(t, want, r.status, "%s: %s", path, r.body)
		if want != http.StatusOK {
			require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), path)
		}
	}
	require.Equal(t, http.StatusUnauthorized, b.do(t, "GET", "/domains/changes", "", "Authorization", "").status)
}
