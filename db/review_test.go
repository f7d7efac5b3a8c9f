package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// storeAnswer stores a model's answer for domain as the classify worker
// does, and returns its provenance id.
func storeAnswer(t *testing.T, tx pgx.Tx, domain string, answer bool, confidence int) uuid.UUID {
	t.Helper()
	id, err := insertJob(t, tx, "c", 1000, domain)
	require.NoError(t, err)
	r := classifier.Result{Domain: domain, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: answer,
		Confidence: confidence, Reasoning: "Scripted.", Source: classifier.SourceLLM, ClassifiedAt: time.Now(),
		ProvenanceID: uuid.Must(uuid.NewV7()), Model: "m1", PromptVersion: "v1"}
	require.NoError(t, db.JobDomainFinish(context.Background(), tx, id, 0, r, "o"))
	return r.ProvenanceID
}

// queued returns the reasons each queued answer of cpg is there for, by
// domain.
func queued(t *testing.T, tx pgx.Tx) map[string][]string {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT domain, reasons FROM review_item WHERE state = 'queued' ORDER BY id`)
	require.NoError(t, err)
	out := map[string][]string{}
	for rows.Next() {
		var d string
		var r []string
		require.NoError(t, rows.Scan(&d, &r))
		out[d] = append(out[d], r...)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestReviewQueue_FilledByTheRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)

	// The default threshold (confidence ≤ 3 is queued), with no audit: the
	// default 1% audit draw would queue a confident answer now and then.
	require.NoError(t, db.ReviewRulesSet(ctx, tx, classifier.ReviewRules{Classifier: "cpg",
		LowConfidence: classifier.DefaultReviewLowConfidence, AuditRate: 0, UpdatedBy: "test"}))
	storeAnswer(t, tx, "unsure.com", true, 3)
	storeAnswer(t, tx, "sure.com", true, 4)
	storeAnswer(t, tx, "flip.com", true, 5)
	require.Equal(t, map[string][]string{"unsure.com": {"low_confidence"}}, queued(t, tx))

	// A refresh that changes the answer is queued; one that keeps it is not.
	storeAnswer(t, tx, "flip.com", false, 5)
	storeAnswer(t, tx, "sure.com", true, 5)
	require.Equal(t, map[string][]string{"unsure.com": {"low_confidence"}, "flip.com": {"changed"}}, queued(t, tx))

	// Rules changed: every confident answer is audited, none is low.
	require.NoError(t, db.ReviewRulesSet(ctx, tx, classifier.ReviewRules{Classifier: "cpg", LowConfidence: 0, AuditRate: 1, UpdatedBy: "ops"}))
	rules, err := db.ReviewRulesGet(ctx, tx, []string{"cpg", "b2b_software"})
	require.NoError(t, err)
	require.Equal(t, 0, rules[0].LowConfidence)
	require.Equal(t, 1.0, rules[0].AuditRate)
	require.Equal(t, classifier.DefaultReviewLowConfidence, rules[1].LowConfidence, "a classifier without rules has the defaults")
	require.Equal(t, classifier.DefaultReviewAuditRate, rules[1].AuditRate)
	storeAnswer(t, tx, "audited.com", true, 2)

	// Many rows in one statement, inserted and then updated (the set-based
	// writes of the list path): each row is looked at.
	_, err = tx.Exec(ctx, `
		WITH p AS (INSERT INTO provenance (id, model) SELECT gen_random_uuid(), 'm2' FROM generate_series(1, 6) RETURNING id),
		     n AS (SELECT id, row_number() OVER () AS i FROM p)
		INSERT INTO result (domain, classifier, status, answer, confidence, provenance_id, classified_at)
		SELECT 'many' || i || '.com', 'cpg', 'COMPLETED', true, 4, id, now() FROM n WHERE i <= 3`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		WITH p AS (INSERT INTO provenance (id, model) SELECT gen_random_uuid(), 'm2' FROM generate_series(1, 3) RETURNING id),
		     n AS (SELECT id, row_number() OVER () AS i FROM p)
		INSERT INTO result (domain, classifier, status, answer, confidence, provenance_id, classified_at)
		SELECT 'many' || i || '.com', 'cpg', 'COMPLETED', i <> 1, 4, id, now() FROM n
		ON CONFLICT (domain, classifier) DO UPDATE SET answer = excluded.answer, provenance_id = excluded.provenance_id`)
	require.NoError(t, err)
	got := queued(t, tx)
	require.Equal(t, []string{"audit"}, got["audited.com"])
	require.Equal(t, []string{"audit", "changed", "audit"}, got["many1.com"], "the first answer, then the changed one")
	require.Equal(t, []string{"audit", "audit"}, got["many2.com"], "a new answer: audited again")

	// The same answer stored again (a redelivered batch) is not queued twice.
	_, err = tx.Exec(ctx, `UPDATE result SET classified_at = now() WHERE classifier = 'cpg'`)
	require.NoError(t, err)
	require.Equal(t, got, queued(t, tx))
}

func TestReviewQueue_AuditDrawIsTheRate(t *testing.T) {
	t.Parallel()
	tx := dbtest.TestTx(t)
	var share float64
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT avg((review_audit_draw(gen_random_uuid()) < 0.1)::int) FROM generate_series(1, 20000)`).Scan(&share))
	require.InDelta(t, 0.1, share, 0.01, "the draw is uniform: 10%% of the answers under a rate of 0.1")
}

func TestReviewVerdict_IsAnOverrideAndUndoRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	storeAnswer(t, tx, "a.com", true, 2)
	storeAnswer(t, tx, "b.com", true, 1)
	storeAnswer(t, tx, "c.com", false, 3)
	// An operator's override of b.com, which the verdict replaces.
	_, _, err := db.OverrideSet(ctx, tx, []classifier.Override{{Classifier: "cpg", Domain: "b.com", Answer: true, Confidence: 4,
		Note: "Operator says so.", SetBy: "ops"}})
	require.NoError(t, err)
	before, err := db.OverrideGet(ctx, tx, "cpg", "b.com")
	require.NoError(t, err)

	next := func(exclude ...int64) classifier.ReviewItem {
		t.Helper()
		it, err := db.ReviewNext(ctx, tx, "cpg", exclude)
		require.NoError(t, err)
		return it
	}
	a := next()
	require.Equal(t, "a.com", a.Domain)
	require.Equal(t, "m1", a.Model)
	require.Equal(t, "Scripted.", a.Reasoning)
	require.Equal(t, "b.com", next(a.ID).Domain, "the page fetches the one after the one it shows")

	no, yes := false, true
	require.NoError(t, db.ReviewVerdict(ctx, tx, a.ID, &no, "Sells software.", "alice"))
	o, err := db.OverrideGet(ctx, tx, "cpg", "a.com")
	require.NoError(t, err)
	require.Equal(t, classifier.Override{Classifier: "cpg", Domain: "a.com", Answer: false, Confidence: 5, Note: "Sells software.",
		SetBy: "alice", SetAt: o.SetAt, ProvenanceID: o.ProvenanceID}, o)
	require.ErrorIs(t, db.ReviewVerdict(ctx, tx, a.ID, &yes, "", "bob"), db.ErrConflict, "reviewed already")

	b := next()
	require.Equal(t, "b.com", b.Domain)
	require.NoError(t, db.ReviewVerdict(ctx, tx, b.ID, &no, "", "alice"))
	c := next()
	require.NoError(t, db.ReviewVerdict(ctx, tx, c.ID, nil, "", "alice")) // skipped: the only one left, at the back
	require.Equal(t, c.ID, next().ID)
	queuedN, reviewed, err := db.ReviewCounts(ctx, tx, "cpg", "alice")
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 2}, [2]int{queuedN, reviewed})

	// Undo, newest first: the skip, then b.com's verdict (the operator's
	// override is back as it was), then a.com's (no override).
	id, action, err := db.ReviewUndo(ctx, tx, "alice")
	require.NoError(t, err)
	require.Equal(t, c.ID, id)
	require.Equal(t, "skip", action)
	id, action, err = db.ReviewUndo(ctx, tx, "alice")
	require.NoError(t, err)
	require.Equal(t, b.ID, id)
	require.Equal(t, "verdict", action)
	after, err := db.OverrideGet(ctx, tx, "cpg", "b.com")
	require.NoError(t, err)
	require.Equal(t, before.ProvenanceID, after.ProvenanceID)
	require.Equal(t, before.SetBy, after.SetBy)
	require.True(t, before.SetAt.Equal(after.SetAt))
	require.Equal(t, before.Answer, after.Answer)
	require.Equal(t, before.Note, after.Note)

	// Someone changed a.com's override since the verdict: the undo refuses.
	_, _, err = db.OverrideSet(ctx, tx, []classifier.Override{{Classifier: "cpg", Domain: "a.com", Answer: true, Confidence: 5,
		Note: "Changed my mind.", SetBy: "ops"}})
	require.NoError(t, err)
	_, _, err = db.ReviewUndo(ctx, tx, "alice")
	require.ErrorIs(t, err, db.ErrConflict)
	require.NoError(t, db.OverrideDelete(ctx, tx, "cpg", "a.com"))
	_, _, err = db.ReviewUndo(ctx, tx, "bob")
	require.ErrorIs(t, err, db.ErrNotFound, "bob did nothing")
	queuedN, _, err = db.ReviewCounts(ctx, tx, "cpg", "alice")
	require.NoError(t, err)
	require.Equal(t, 2, queuedN, "b.com and c.com are queued again")
}

func TestReviewDispute_OncePerCaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	_, _, err := db.ReviewDispute(ctx, tx, "c1", "cpg", "none.com", "Why?")
	require.ErrorIs(t, err, db.ErrNotFound, "no answer to dispute")

	p := storeAnswer(t, tx, "sure.com", true, 5) // confident: not queued
	require.Empty(t, queued(t, tx))
	d, created, err := db.ReviewDispute(ctx, tx, "c1", "cpg", "sure.com", "They sell software.")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, p, d.Item.ProvenanceID)
	require.Equal(t, []string{"disputed"}, d.Item.Reasons)
	again, created, err := db.ReviewDispute(ctx, tx, "c1", "cpg", "sure.com", "Another note.")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, d.ID, again.ID)
	require.Equal(t, "They sell software.", again.Note, "the first dispute")
	other, created, err := db.ReviewDispute(ctx, tx, "c2", "cpg", "sure.com", "Me too.")
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, d.ID, other.ID)
	require.Equal(t, map[string][]string{"sure.com": {"disputed"}}, queued(t, tx), "one item for the answer")
	it, err := db.ReviewNext(ctx, tx, "cpg", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"They sell software.", "Me too."}, it.Disputes)
}

func TestReviewStats_Wilson(t *testing.T) {
	t.Parallel()
	// 90 of 100: the textbook Wilson interval is [0.8256, 0.9448].
	low, high := classifier.Wilson(90, 100, 1.959963984540054)
	require.InDelta(t, 0.8256, low, 0.0001)
	require.InDelta(t, 0.9448, high, 0.0001)
	low, high = classifier.Wilson(0, 10, 1.96)
	require.Equal(t, 0.0, low)
	require.InDelta(t, 0.2775, high, 0.0001)
	low, high = classifier.Wilson(10, 10, 1.96)
	require.InDelta(t, 0.7225, low, 0.0001)
	require.Equal(t, 1.0, high)
}
