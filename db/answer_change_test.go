package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// modelAnswers stores answers as the list chunk path stores them: one
// multi-row upsert into result (each with a provenance row of its own), and
// returns the provenance ids, in order.
func modelAnswers(t *testing.T, tx pgx.Tx, status string, domains []string, answers []bool, confidence int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	ids := make([]uuid.UUID, len(domains))
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	_, err := tx.Exec(ctx, `INSERT INTO provenance (id, model, prompt_version) SELECT unnest($1::uuid[]), 'm', 'p1'`, ids)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		INSERT INTO result (domain, classifier, status, answer, confidence, provenance_id, classified_at)
		SELECT d, 'cpg', $4, a, $3, p, now() FROM unnest($1::text[], $2::bool[], $5::uuid[]) AS u (d, a, p)
		ON CONFLICT (domain, classifier) DO UPDATE
		SET status = excluded.status, answer = excluded.answer, confidence = excluded.confidence,
		    provenance_id = excluded.provenance_id, classified_at = excluded.classified_at
		WHERE excluded.status = 'COMPLETED' OR result.status = 'FAILED'`,
		domains, answers, confidence, status, ids)
	require.NoError(t, err)
	return ids
}

func changes(t *testing.T, tx pgx.Tx) []db.AnswerChange {
	t.Helper()
	_, err := db.AnswerChangesPublish(context.Background(), tx, 1000)
	require.NoError(t, err)
	cs, err := db.AnswerChangesAfter(context.Background(), tx, "cpg", 0, 1000)
	require.NoError(t, err)
	return cs
}

func ptr[T any](v T) *T { return &v }

func TestAnswerChange_Refresh(t *testing.T) {
	t.Parallel()
	tx := dbtest.TestTx(t)
	domains := []string{"a.com", "b.com", "c.com", "d.com"}
	first := modelAnswers(t, tx, "COMPLETED", domains, []bool{true, true, false, true}, 2)
	// FAILED before: a first answer is no change.
	modelAnswers(t, tx, "FAILED", []string{"e.com"}, []bool{false}, 1)
	modelAnswers(t, tx, "COMPLETED", []string{"e.com"}, []bool{true}, 4)
	require.Empty(t, changes(t, tx), "first answers are not changes")

	// One multi-row refresh: a.com flips, b.com keeps its answer with a new
	// confidence, c.com flips, d.com fails (a FAILED never replaces).
	second := modelAnswers(t, tx, "COMPLETED", domains[:3], []bool{false, true, true}, 4)
	modelAnswers(t, tx, "FAILED", domains[3:], []bool{false}, 1)

	got := changes(t, tx)
	require.Len(t, got, 2)
	for i, want := range []struct {
		domain   string
		old, new bool
		oldP     uuid.UUID
		newP     uuid.UUID
	}{{"a.com", true, false, first[0], second[0]}, {"c.com", false, true, first[2], second[2]}} {
		c := got[i]
		require.Equal(t, want.domain, c.Domain)
		require.Equal(t, classifier.CauseRefresh, c.Cause)
		require.Equal(t, int64(i+1), c.Seq)
		require.Equal(t, classifier.AnswerState{Answer: ptr(want.old), Confidence: ptr(2), ProvenanceID: &want.oldP}, c.Old)
		require.Equal(t, classifier.AnswerState{Answer: ptr(want.new), Confidence: ptr(4), ProvenanceID: &want.newP}, c.New)
	}

	// Under an override the model's answer is not served: no change.
	_, _, err := db.OverrideSet(context.Background(), tx, []classifier.Override{
		{Classifier: "cpg", Domain: "b.com", Answer: true, Confidence: 5, Note: "checked", SetBy: "ops"}})
	require.NoError(t, err)
	modelAnswers(t, tx, "COMPLETED", []string{"b.com"}, []bool{false}, 3)
	require.Len(t, changes(t, tx), 2, "a refresh under an override changes nothing served")
}

func TestAnswerChange_Overrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	model := modelAnswers(t, tx, "COMPLETED", []string{"a.com", "b.com"}, []bool{true, true}, 3)
	set := func(domain string, answer bool) {
		t.Helper()
		_, _, err := db.OverrideSet(ctx, tx, []classifier.Override{
			{Classifier: "cpg", Domain: domain, Answer: answer, Confidence: 5, Note: "looked", SetBy: "ops"}})
		require.NoError(t, err)
	}
	set("a.com", true) // confirms: no change
	o0, err := db.OverrideGet(ctx, tx, "cpg", "a.com")
	require.NoError(t, err)
	set("new.com", false) // nothing served before: no change
	require.Empty(t, changes(t, tx))

	set("b.com", false) // an operator's: override
	o1, err := db.OverrideGet(ctx, tx, "cpg", "b.com")
	require.NoError(t, err)
	// A reviewer's verdict, named in its transaction: review.
	_, err = tx.Exec(ctx, `SAVEPOINT verdict`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, db.CauseReviewSQL)
	require.NoError(t, err)
	set("b.com", true)
	o2, err := db.OverrideGet(ctx, tx, "cpg", "b.com")
	require.NoError(t, err)
	set("a.com", false)
	o3, err := db.OverrideGet(ctx, tx, "cpg", "a.com")
	require.NoError(t, err)
	require.NoError(t, db.OverrideDelete(ctx, tx, "cpg", "a.com"))   // back to the model's yes
	require.NoError(t, db.OverrideDelete(ctx, tx, "cpg", "new.com")) // no answer behind it

	got := changes(t, tx)
	type row struct {
		Domain, Cause string
		Old, New      classifier.AnswerState
	}
	var rows []row
	for _, c := range got {
		rows = append(rows, row{c.Domain, c.Cause, c.Old, c.New})
	}
	require.Equal(t, []row{
		{"b.com", "override", classifier.AnswerState{Answer: ptr(true), Confidence: ptr(3), ProvenanceID: &model[1]},
			classifier.AnswerState{Answer: ptr(false), Confidence: ptr(5), ProvenanceID: &o1.ProvenanceID}},
		{"b.com", "review", classifier.AnswerState{Answer: ptr(false), Confidence: ptr(5), ProvenanceID: &o1.ProvenanceID},
			classifier.AnswerState{Answer: ptr(true), Confidence: ptr(5), ProvenanceID: &o2.ProvenanceID}},
		{"a.com", "review", classifier.AnswerState{Answer: ptr(true), Confidence: ptr(5), ProvenanceID: &o0.ProvenanceID},
			classifier.AnswerState{Answer: ptr(false), Confidence: ptr(5), ProvenanceID: &o3.ProvenanceID}},
		{"a.com", "review", classifier.AnswerState{Answer: ptr(false), Confidence: ptr(5), ProvenanceID: &o3.ProvenanceID},
			classifier.AnswerState{Answer: ptr(true), Confidence: ptr(3), ProvenanceID: &model[0]}},
	}, rows)
}

// The published order is the order of publication, and a page after a
// cursor starts where the last one stopped, per classifier.
func TestAnswerChange_PublishAndPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	for i := range 5 {
		for _, cls := range []string{"cpg", "b2b"} {
			require.NoError(t, db.AnswerChangeRecord(ctx, tx, db.AnswerChange{Classifier: cls, Domain: fmt.Sprintf("d%d.com", i),
				Cause: classifier.CauseOverride, Old: classifier.AnswerState{Answer: ptr(true)}, New: classifier.AnswerState{Answer: ptr(false)}}))
		}
	}
	page, err := db.AnswerChangesAfter(ctx, tx, "cpg", 0, 10)
	require.NoError(t, err)
	require.Empty(t, page, "nothing is listed before it is published")
	ids, err := db.AnswerChangesPublish(ctx, tx, 6)
	require.NoError(t, err)
	require.Len(t, ids, 6)
	ids, err = db.AnswerChangesPublish(ctx, tx, 6)
	require.NoError(t, err)
	require.Len(t, ids, 4)

	var domains []string
	var after int64
	for {
		page, err := db.AnswerChangesAfter(ctx, tx, "cpg", after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, c := range page {
			require.Equal(t, "cpg", c.Classifier)
			require.Greater(t, c.Seq, after)
			domains = append(domains, c.Domain)
		}
		after = page[len(page)-1].Seq
	}
	require.Equal(t, []string{"d0.com", "d1.com", "d2.com", "d3.com", "d4.com"}, domains)
}

// Who is told: jobs and lists of the classifier with a callback that got
// the old answer and ended within the window (or are running); one per
// list however many of its rows got it.
func TestAnswerChange_Recipients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	old := modelAnswers(t, tx, "COMPLETED", []string{"a.com"}, []bool{true}, 2)[0]
	other := modelAnswers(t, tx, "COMPLETED", []string{"z.com"}, []bool{true}, 2)[0]

	job := func(callback string, ended time.Duration, provenance uuid.UUID, cls string) uuid.UUID {
		t.Helper()
		id := uuid.New()
		_, err := tx.Exec(ctx, `INSERT INTO classify_job (id, caller, classifier, callback_url, inputs, domains, status, completed_at)
			VALUES ($1, 'c', $4, NULLIF($2, ''), '{a.com}', '{a.com}', 'COMPLETED', now() - make_interval(secs => $3))`,
			id, callback, ended.Seconds(), cls)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO classify_job_domain (job_id, position, domain, status, answer, confidence, source, provenance_id)
			VALUES ($1, 0, 'a.com', 'COMPLETED', true, 2, 'cache', $2)`, id, provenance)
		require.NoError(t, err)
		return id
	}
	const window = 30 * 24 * time.Hour
	told := job("https://hooks.example.com/a", time.Hour, old, "cpg")
	job("", time.Hour, old, "cpg")                                   // no callback
	job("https://hooks.example.com/a", window+time.Hour, old, "cpg") // ended before the window
	job("https://hooks.example.com/a", time.Hour, other, "cpg")      // another answer

	list := uuid.New()
	_, err := tx.Exec(ctx, `INSERT INTO list (id, caller, classifier, callback_url, rows, domains, duplicates, rejected, chunk_rows, chunks, next_chunk, retention, status)
		VALUES ($1, 'c', 'cpg', 'https://hooks.example.com/l', 3, 1, 2, 0, 100, 1, 1, '720h', 'RUNNING')`, list)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO list_row (list_id, row, input, domain, status, provenance_id)
		SELECT $1, g, 'a.com', 'a.com', 'COMPLETED', $2 FROM generate_series(1, 3) g`, list, old)
	require.NoError(t, err)

	modelAnswers(t, tx, "COMPLETED", []string{"a.com"}, []bool{false}, 4)
	ids, err := db.AnswerChangesPublish(ctx, tx, 10)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	got, err := db.AnswerChangeNotify(ctx, tx, ids, window)
	require.NoError(t, err)
	require.ElementsMatch(t, []db.ChangeRecipient{{ChangeID: ids[0], JobID: told}, {ChangeID: ids[0], ListID: list}}, got)
}

// A job told that its answer changed holds the new one: it is told again
// when that one changes (a reviewer's undo), once per change however it
// came to hold the answer.
func TestAnswerChange_ToldHoldTheNewAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	got := modelAnswers(t, tx, "COMPLETED", []string{"a.com"}, []bool{true}, 2)[0]
	job := uuid.New()
	_, err := tx.Exec(ctx, `INSERT INTO classify_job (id, caller, classifier, callback_url, inputs, domains, status, completed_at)
		VALUES ($1, 'c', 'cpg', 'https://hooks.example.com/a', '{a.com}', '{a.com}', 'COMPLETED', now())`, job)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO classify_job_domain (job_id, position, domain, status, answer, confidence, source, provenance_id)
		VALUES ($1, 0, 'a.com', 'COMPLETED', true, 2, 'llm', $2)`, job, got)
	require.NoError(t, err)
	notify := func() []db.ChangeRecipient {
		t.Helper()
		ids, err := db.AnswerChangesPublish(ctx, tx, 10)
		require.NoError(t, err)
		require.Len(t, ids, 1)
		to, err := db.AnswerChangeNotify(ctx, tx, ids, time.Hour)
		require.NoError(t, err)
		for i := range to {
			to[i].ChangeID = 0
		}
		return to
	}
	told := []db.ChangeRecipient{{JobID: job}}

	// A verdict turns the yes to no: the job got the yes.
	_, err = tx.Exec(ctx, db.CauseReviewSQL)
	require.NoError(t, err)
	_, _, err = db.OverrideSet(ctx, tx, []classifier.Override{{Classifier: "cpg", Domain: "a.com", Answer: false, Confidence: 5, Note: "no", SetBy: "r"}})
	require.NoError(t, err)
	require.Equal(t, told, notify())
	// Undone: the job never got the verdict's answer, but was told of it.
	require.NoError(t, db.OverrideDelete(ctx, tx, "cpg", "a.com"))
	require.Equal(t, told, notify(), "told of the undo")
	// The model's yes (which the job got, and was told of again) turns to
	// no: one delivery, not one per way it holds the answer.
	modelAnswers(t, tx, "COMPLETED", []string{"a.com"}, []bool{false}, 4)
	require.Equal(t, told, notify())
}
