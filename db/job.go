package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// JobInsertParams is what an accepted request writes.
type JobInsertParams struct {
	ID          uuid.UUID
	Caller      string
	Classifier  string
	Domains     []classifier.DomainInput
	CallbackURL string
	// RiverJobID is the job's River job, inserted first in the same
	// transaction, so the row is written whole in one statement.
	RiverJobID int64
	// MaxQueuedDomains, when positive, refuses the job with a
	// *QueueFullError if the caller's domains not yet final would exceed it.
	MaxQueuedDomains int
}

// QueueFullError refuses a job that would take the caller's domains
// accepted and not yet final over their limit.
type QueueFullError struct {
	// Queued is the caller's count before this job; when it equals Limit
	// it may be more (the count stops reading at Limit).
	Queued int
	Limit  int
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("caller has %d domains queued; the limit is %d", e.Queued, e.Limit)
}

// JobInsert writes a job with its domains (the claim check of its River
// job). With MaxQueuedDomains it returns a *QueueFullError, writing
// nothing, when the job does not fit the caller's limit.
func JobInsert(ctx context.Context, exec DBTX, p JobInsertParams) error {
	inputs := make([]string, len(p.Domains))
	domains := make([]string, len(p.Domains))
	for i, d := range p.Domains {
		inputs[i], domains[i] = d.Input, d.Domain
	}
	var (
		queued   int
		inserted bool
	)
	// The caller's domains not yet final, from its unfinished jobs' rows
	// (domains minus done), reading at most MaxQueuedDomains of them
	// however large a backlog grows. The job is written only if it fits.
	err := exec.QueryRow(ctx, `
		WITH queued AS (
			SELECT coalesce(sum(n), 0)::int AS n FROM (
				SELECT cardinality(j.domains) - j.done AS n FROM classify_job j
				WHERE j.caller = $2 AND j.status IN ('PENDING', 'RUNNING')
				LIMIT greatest($8::int, 0)
			) q
		), ins AS (
			INSERT INTO classify_job (id, caller, classifier, callback_url, inputs, domains, river_job_id)
			SELECT $1, $2, $3, NULLIF($4, ''), $5, $6, $7 FROM queued
			WHERE $8::int <= 0 OR n + cardinality($6::text[]) <= $8::int
			RETURNING 1
		)
		SELECT n, EXISTS (SELECT FROM ins) FROM queued`,
		p.ID, p.Caller, p.Classifier, p.CallbackURL, inputs, domains, p.RiverJobID, p.MaxQueuedDomains,
	).Scan(&queued, &inserted)
	if err != nil {
		return translate(err)
	}
	if !inserted {
		return &QueueFullError{Queued: queued, Limit: p.MaxQueuedDomains}
	}
	return nil
}

// JobGetOfCaller returns caller's job id with its domains; another caller's
// job is ErrNotFound, as is an unknown id.
func JobGetOfCaller(ctx context.Context, exec DBTX, id uuid.UUID, caller string) (*classifier.Job, error) {
	return jobGet(ctx, exec, id, &caller)
}

// JobGet returns job id with its domains, or ErrNotFound.
func JobGet(ctx context.Context, exec DBTX, id uuid.UUID) (*classifier.Job, error) {
	return jobGet(ctx, exec, id, nil)
}

func jobDomains(ctx context.Context, exec DBTX, jobID uuid.UUID, classifierName string) ([]classifier.JobDomain, error) {
	rows, err := exec.Query(ctx, `
		SELECT u.ord - 1, u.input, u.domain, coalesce(d.status, 'PENDING'), d.is_cpg, d.confidence, d.reasoning,
		       d.source, d.error, d.classified_at
		FROM classify_job j
		CROSS JOIN LATERAL unnest(j.inputs, j.domains) WITH ORDINALITY AS u (input, domain, ord)
		LEFT JOIN classify_job_domain d ON d.job_id = j.id AND d.position = u.ord - 1
		WHERE j.id = $1
		ORDER BY u.ord`, jobID)
	return collect(rows, err, func(row pgx.CollectableRow) (classifier.JobDomain, error) {
		var (
			d                        classifier.JobDomain
			isCPG                    *bool
			confidence               *int16
			reasoning, source, error *string
			classifiedAt             *time.Time
		)
		err := row.Scan(&d.Position, &d.Input, &d.Result.Domain, &d.Result.Status, &isCPG, &confidence,
			&reasoning, &source, &error, &classifiedAt)
		d.Result.Classifier = classifierName
		d.Result.ClassifiedAt = deref(classifiedAt)
		d.Result.Answer = deref(isCPG)
		d.Result.Confidence = int(deref(confidence))
		d.Result.Reasoning, d.Result.Source, d.Result.Error = deref(reasoning), classifier.Source(deref(source)), deref(error)
		return d, err
	})
}

// JobStart marks job id RUNNING when it is PENDING, or FAILED and retried by
// an operator, and returns it with its domains (ErrNotFound for an unknown
// id).
func JobStart(ctx context.Context, exec DBTX, id uuid.UUID) (*classifier.Job, error) {
	if _, err := exec.Exec(ctx, `
		UPDATE classify_job
		SET status = 'RUNNING', started_at = coalesce(started_at, now()), error = NULL, completed_at = NULL
		WHERE id = $1 AND status IN ('PENDING', 'FAILED')`, id); err != nil {
		return nil, translate(err)
	}
	return JobGet(ctx, exec, id)
}

// JobDomainFinish stores the final answer of the domain at position in a
// job and, for an answer from the model, upserts the shared result on
// (domain, classifier) and releases owner's claim on the domain: one batch,
// which Postgres runs as one transaction (one round trip, on the pool or in
// the caller's transaction). A domain already final for the job keeps its
// first answer (a redelivered job). A FAILED answer never replaces a
// COMPLETED one in the shared results.
func JobDomainFinish(ctx context.Context, exec DBTX, jobID uuid.UUID, position int, r classifier.Result, owner string) error {
	batch := &pgx.Batch{}
	if r.Source == classifier.SourceLLM {
		queueResultUpsert(batch, r)
	}
	batch.Queue(`
		WITH final AS (
			INSERT INTO classify_job_domain (job_id, position, domain, status, is_cpg, confidence, reasoning,
			                                 source, error, classified_at)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''), NULLIF($9, ''), $10)
			ON CONFLICT (job_id, position) DO NOTHING
			RETURNING 1
		)
		UPDATE classify_job SET done = done + 1 WHERE id = $1 AND EXISTS (SELECT FROM final)`,
		jobID, position, r.Domain, r.Status, answerOrNil(r), confidenceOrNil(r), r.Reasoning, string(r.Source), r.Error, r.ClassifiedAt)
	queueClaimRelease(batch, r.Classifier, r.Domain, owner)
	return translate(exec.SendBatch(ctx, batch).Close())
}

// JobEnd is how a job ended, as the statement that ended it wrote it.
type JobEnd struct {
	Status classifier.Status
	// CompletedAt is when the job ended. A job can end more than once
	// (FAILED, then retried by an operator), and each end has its own
	// CompletedAt, so it names the end.
	CompletedAt time.Time
	// CallbackURL is the job's webhook address, "" for none.
	CallbackURL string
}

// JobComplete marks job id COMPLETED. ended is false when it already was
// (a redelivered job), so that the caller queues follow-up work, such as a
// webhook, once per end.
func JobComplete(ctx context.Context, exec DBTX, id uuid.UUID) (end JobEnd, ended bool, err error) {
	return jobEnd(ctx, exec, `
		UPDATE classify_job SET status = 'COMPLETED', error = NULL, completed_at = now()
		WHERE id = $1 AND status <> 'COMPLETED'
		RETURNING status, completed_at, coalesce(callback_url, '')`, id)
}

// JobFail marks job id FAILED with a reason (River gave it up). ended is
// false when the job had already ended.
func JobFail(ctx context.Context, exec DBTX, id uuid.UUID, reason string) (end JobEnd, ended bool, err error) {
	return jobEnd(ctx, exec, `
		UPDATE classify_job SET status = 'FAILED', error = $2, completed_at = now()
		WHERE id = $1 AND status NOT IN ('COMPLETED', 'FAILED')
		RETURNING status, completed_at, coalesce(callback_url, '')`, id, reason)
}

func jobEnd(ctx context.Context, exec DBTX, sql string, args ...any) (JobEnd, bool, error) {
	var end JobEnd
	err := exec.QueryRow(ctx, sql, args...).Scan(&end.Status, &end.CompletedAt, &end.CallbackURL)
	switch err = translate(err); {
	case err == nil:
		return end, true, nil
	case isNotFound(err):
		return JobEnd{}, false, nil
	}
	return JobEnd{}, false, err
}

func answerOrNil(r classifier.Result) *bool {
	if r.Status != classifier.StatusCompleted {
		return nil
	}
	return &r.Answer
}

func confidenceOrNil(r classifier.Result) *int16 {
	if r.Status != classifier.StatusCompleted {
		return nil
	}
	c := int16(r.Confidence)
	return &c
}

// JobPurge deletes jobs that ended (COMPLETED or FAILED) more than
// olderThan ago, with their answers and Idempotency-Keys (ON DELETE
// CASCADE), at most batch at a time, and returns how many it deleted.
// Shared answers (table result) are not touched.
func JobPurge(ctx context.Context, exec DBTX, olderThan time.Duration, batch int) (int64, error) {
	tag, err := exec.Exec(ctx, `
		DELETE FROM classify_job WHERE id = ANY (ARRAY(
			SELECT id FROM classify_job
			WHERE status IN ('COMPLETED', 'FAILED') AND completed_at < now() - make_interval(secs => $1)
			LIMIT $2))`, olderThan.Seconds(), batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}
