package db

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// AnswerChange is a change of a served answer (classifier.AnswerChange).
//
// Who records changes: the triggers of migration 00019, on result (a
// refresh) and on override (an override, or a review), in the statement
// that makes the change, whichever process, role or batch makes it. So a
// writer of result or override records nothing itself; one that sets an
// override as a reviewer's verdict names the cause first, in the same
// transaction (CauseReviewSQL). AnswerChangeRecord is for a change made
// some other way.
type AnswerChange = classifier.AnswerChange

// CauseReviewSQL, run in a transaction before it sets or deletes overrides,
// makes their changes cause "review" instead of "override" (the trigger
// reads the setting). SET LOCAL ends with the transaction.
const CauseReviewSQL = `SET LOCAL domainclass.cause = 'review'`

// AnswerChangeRecord records that the served answer of (classifier,
// domain) changed, as the triggers do. It needs INSERT on answer_change,
// which only the owner has (the roles' writes go through the triggers).
func AnswerChangeRecord(ctx context.Context, exec DBTX, c AnswerChange) error {
	_, err := exec.Exec(ctx, `
		INSERT INTO answer_change (classifier, domain, old_provenance_id, new_provenance_id, old_answer, new_answer,
		                           old_confidence, new_confidence, cause, changed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()))`,
		c.Classifier, c.Domain, c.Old.ProvenanceID, c.New.ProvenanceID, c.Old.Answer, c.New.Answer,
		c.Old.Confidence, c.New.Confidence, c.Cause, nullTime(c.ChangedAt))
	return translate(err)
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

const answerChangeColumns = `id, coalesce(seq, 0), classifier, domain, cause, changed_at,
	old_answer, old_confidence, old_provenance_id, new_answer, new_confidence, new_provenance_id`

func scanAnswerChange(row pgx.CollectableRow) (AnswerChange, error) {
	var (
		c                AnswerChange
		oldConf, newConf *int16
		oldProv, newProv *uuid.UUID
	)
	err := row.Scan(&c.ID, &c.Seq, &c.Classifier, &c.Domain, &c.Cause, &c.ChangedAt,
		&c.Old.Answer, &oldConf, &oldProv, &c.New.Answer, &newConf, &newProv)
	c.Old.Confidence, c.New.Confidence = intOf(oldConf), intOf(newConf)
	c.Old.ProvenanceID, c.New.ProvenanceID = oldProv, newProv
	return c, err
}

func intOf(p *int16) *int {
	if p == nil {
		return nil
	}
	n := int(*p)
	return &n
}

// AnswerChangesAfter returns the published changes of a classifier after
// the one published as seq after (0: from the first), in published order,
// at most limit.
func AnswerChangesAfter(ctx context.Context, exec DBTX, classifierName string, after int64, limit int) ([]AnswerChange, error) {
	rows, err := exec.Query(ctx, `SELECT `+answerChangeColumns+` FROM answer_change
		WHERE classifier = $1 AND seq > $2 ORDER BY seq LIMIT $3`, classifierName, after, limit)
	return collect(rows, err, scanAnswerChange)
}

// AnswerChangeGet returns the change id, or ErrNotFound.
func AnswerChangeGet(ctx context.Context, exec DBTX, id int64) (AnswerChange, error) {
	rows, err := exec.Query(ctx, `SELECT `+answerChangeColumns+` FROM answer_change WHERE id = $1`, id)
	if err != nil {
		return AnswerChange{}, translate(err)
	}
	c, err := pgx.CollectExactlyOneRow(rows, scanAnswerChange)
	return c, translate(err)
}

// AnswerChangesPublish gives the oldest changes not yet published, at most
// limit, the next places in the published order, and returns their ids.
// Run it in the transaction that fans them out: publishers take turns (a
// transaction-level advisory lock), so a seq is given only after every
// smaller one has committed, and a reader paging by seq skips none.
func AnswerChangesPublish(ctx context.Context, tx pgx.Tx, limit int) ([]int64, error) {
	// The key names the schema: deployments (and tests) sharing a
	// database do not wait for each other.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('domainclass.answer_change_publish.' || current_schema()))`); err != nil {
		return nil, translate(err)
	}
	rows, err := tx.Query(ctx, `
		WITH base AS (SELECT coalesce(max(seq), 0) AS seq FROM answer_change),
		next AS (
			SELECT id, row_number() OVER (ORDER BY id) AS n
			FROM (SELECT id FROM answer_change WHERE seq IS NULL ORDER BY id LIMIT $1) u
		)
		UPDATE answer_change c SET seq = base.seq + next.n
		FROM next, base WHERE c.id = next.id
		RETURNING c.id`, limit)
	ids, err := collect(rows, err, pgx.RowTo[int64])
	return ids, err
}

// ChangeRecipient is a job or a list (one of the two ids is set) with a
// callback URL that received the answer a change replaced.
type ChangeRecipient struct {
	ChangeID int64
	JobID    uuid.UUID
	ListID   uuid.UUID
}

// AnswerChangeRecipients returns who is told of the changes ids: each job
// and each list of the change's classifier with a callback URL that
// received the old answer (a row pointing at its provenance: answered by
// that model call or override, cache hits included) and ended within
// window of the change, or has not ended. One per (change, job or list),
// found by the provenance indexes of classify_job_domain and list_row.
func AnswerChangeRecipients(ctx context.Context, exec DBTX, ids []int64, window time.Duration) ([]ChangeRecipient, error) {
	rows, err := exec.Query(ctx, `
		WITH c AS (
			SELECT id, classifier, domain, old_provenance_id, changed_at - make_interval(secs => $2) AS since
			FROM answer_change WHERE id = ANY($1) AND old_provenance_id IS NOT NULL
		)
		SELECT DISTINCT c.id, j.id, NULL::uuid
		FROM c JOIN classify_job_domain d ON d.provenance_id = c.old_provenance_id AND d.domain = c.domain
		       JOIN classify_job j ON j.id = d.job_id AND j.classifier = c.classifier
		WHERE coalesce(j.callback_url, '') <> '' AND coalesce(j.completed_at, 'infinity') >= c.since
		UNION ALL
		SELECT DISTINCT c.id, NULL::uuid, l.id
		FROM c JOIN list_row r ON r.provenance_id = c.old_provenance_id AND r.domain = c.domain
		       JOIN list l ON l.id = r.list_id AND l.classifier = c.classifier
		WHERE coalesce(l.callback_url, '') <> '' AND coalesce(l.completed_at, 'infinity') >= c.since
		ORDER BY 1`, ids, window.Seconds())
	return collect(rows, err, func(row pgx.CollectableRow) (ChangeRecipient, error) {
		var (
			r         ChangeRecipient
			job, list *uuid.UUID
		)
		err := row.Scan(&r.ChangeID, &job, &list)
		r.JobID, r.ListID = deref(job), deref(list)
		return r, err
	})
}
