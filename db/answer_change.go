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

// AnswerChangeNotify finds who is told of the changes ids, records them as
// told (answer_change_notice), and returns them: each job and each list of
// the change's classifier with a callback URL that holds the old answer
// and ended within window of the change, or has not ended. A job or list
// holds an answer when a row of it got the answer (its provenance: that
// model call or override, cache hits included), or when it was told of an
// earlier change to that answer. One per (change, job or list), found by
// the provenance indexes of classify_job_domain, list_row and
// answer_change_notice. Run it once per change, in the transaction that
// publishes them (AnswerChangesPublish).
func AnswerChangeNotify(ctx context.Context, exec DBTX, ids []int64, window time.Duration) ([]ChangeRecipient, error) {
	rows, err := exec.Query(ctx, `
		WITH c AS (
			SELECT id, classifier, domain, old_provenance_id, new_provenance_id,
			       changed_at - make_interval(secs => $2) AS since
			FROM answer_change WHERE id = ANY($1) AND old_provenance_id IS NOT NULL
		), held_by_jobs AS (
			SELECT c.id AS change_id, d.job_id
			FROM c JOIN classify_job_domain d ON d.provenance_id = c.old_provenance_id AND d.domain = c.domain
			UNION
			SELECT c.id, n.job_id FROM c JOIN answer_change_notice n ON n.provenance_id = c.old_provenance_id
			WHERE n.job_id IS NOT NULL
		), held_by_lists AS (
			SELECT c.id AS change_id, r.list_id
			FROM c JOIN list_row r ON r.provenance_id = c.old_provenance_id AND r.domain = c.domain
			UNION
			SELECT c.id, n.list_id FROM c JOIN answer_change_notice n ON n.provenance_id = c.old_provenance_id
			WHERE n.list_id IS NOT NULL
		), told AS (
			SELECT c.id AS change_id, c.new_provenance_id, j.id AS job_id, NULL::uuid AS list_id
			FROM held_by_jobs h JOIN c ON c.id = h.change_id
			     JOIN classify_job j ON j.id = h.job_id AND j.classifier = c.classifier
			WHERE coalesce(j.callback_url, '') <> '' AND coalesce(j.completed_at, 'infinity') >= c.since
			UNION ALL
			SELECT c.id, c.new_provenance_id, NULL::uuid, l.id
			FROM held_by_lists h JOIN c ON c.id = h.change_id
			     JOIN list l ON l.id = h.list_id AND l.classifier = c.classifier
			WHERE coalesce(l.callback_url, '') <> '' AND coalesce(l.completed_at, 'infinity') >= c.since
		)
		INSERT INTO answer_change_notice (change_id, provenance_id, job_id, list_id)
		SELECT change_id, new_provenance_id, job_id, list_id FROM told
		RETURNING change_id, job_id, list_id`, ids, window.Seconds())
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
