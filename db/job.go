package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	// Want is what the job accepts as a cached answer.
	Want classifier.Want
}

// maxAgeOrNil and sinceOrNil store a Want's parts, NULL for none.
func maxAgeOrNil(w classifier.Want) any {
	if w.MaxAge <= 0 {
		return nil
	}
	return w.MaxAge
}

func sinceOrNil(w classifier.Want) any {
	if w.Since.IsZero() {
		return nil
	}
	return w.Since
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
	// The caller's queued domains are one row of caller_queue: the job is
	// written only if the row, with this job's domains added, stays within
	// MaxQueuedDomains. The row stays locked until the transaction ends,
	// which orders one caller's accepts: the limit holds exactly however
	// many arrive at once, at one row's cost however long the backlog.
	var inserted bool
	err := exec.QueryRow(ctx, `
		WITH admit AS (
			INSERT INTO caller_queue AS q (caller, domains)
			SELECT $2, cardinality($6::text[])
			WHERE $8::int <= 0 OR cardinality($6::text[]) <= $8::int
			ON CONFLICT (caller) DO UPDATE SET domains = q.domains + excluded.domains
			WHERE $8::int <= 0 OR q.domains + excluded.domains <= $8::int
			RETURNING 1
		), ins AS (
			INSERT INTO classify_job (id, caller, classifier, callback_url, inputs, domains, river_job_id, want_max_age, want_since)
			SELECT $1, $2, $3, NULLIF($4, ''), $5, $6, $7, $9, $10 FROM admit
			RETURNING 1
		)
		SELECT EXISTS (SELECT FROM ins)`,
		p.ID, p.Caller, p.Classifier, p.CallbackURL, inputs, domains, p.RiverJobID, p.MaxQueuedDomains,
		maxAgeOrNil(p.Want), sinceOrNil(p.Want),
	).Scan(&inserted)
	if err != nil {
		return translate(err)
	}
	if !inserted {
		var queued int
		err := exec.QueryRow(ctx, `SELECT coalesce((SELECT domains FROM caller_queue WHERE caller = $1), 0)`,
			p.Caller).Scan(&queued)
		if err != nil {
			return translate(err)
		}
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
		SELECT u.ord - 1, u.input, u.domain, coalesce(d.status, 'PENDING'), d.answer, d.confidence, d.reasoning,
		       d.source, d.error, d.classified_at, `+provenanceColumns+`
		FROM classify_job j
		CROSS JOIN LATERAL unnest(j.inputs, j.domains) WITH ORDINALITY AS u (input, domain, ord)
		LEFT JOIN classify_job_domain d ON d.job_id = j.id AND d.position = u.ord - 1
		LEFT JOIN provenance p ON p.id = d.provenance_id
		WHERE j.id = $1
		ORDER BY u.ord`, jobID)
	return collect(rows, err, func(row pgx.CollectableRow) (classifier.JobDomain, error) {
		var (
			d                        classifier.JobDomain
			answer                   *bool
			confidence               *int16
			reasoning, source, error *string
			classifiedAt             *time.Time
			provenance               pgtype.UUID
		)
		err := row.Scan(append([]any{&d.Position, &d.Input, &d.Result.Domain, &d.Result.Status, &answer, &confidence,
			&reasoning, &source, &error, &classifiedAt}, provenanceDest(&d.Result, &provenance)...)...)
		d.Result.ProvenanceID = provenance.Bytes
		d.Result.Classifier = classifierName
		d.Result.ClassifiedAt = deref(classifiedAt)
		d.Result.Answer = deref(answer)
		d.Result.Confidence = int(deref(confidence))
		d.Result.Reasoning, d.Result.Source, d.Result.Error = deref(reasoning), classifier.Source(deref(source)), deref(error)
		return d, err
	})
}

// JobStart marks job id RUNNING when it is PENDING, or FAILED and retried by
// an operator, and returns it with its domains (ErrNotFound for an unknown
// id).
func JobStart(ctx context.Context, exec DBTX, id uuid.UUID) (*classifier.Job, error) {
	// A FAILED job retried counts toward its caller's queued domains again.
	if _, err := exec.Exec(ctx, `
		WITH old AS (
			SELECT id, status FROM classify_job WHERE id = $1 FOR UPDATE
		), started AS (
			UPDATE classify_job j
			SET status = 'RUNNING', started_at = coalesce(started_at, now()), error = NULL, completed_at = NULL
			FROM old
			WHERE j.id = old.id AND old.status IN ('PENDING', 'FAILED')
			RETURNING j.caller, cardinality(j.domains) AS n, old.status AS was
		)
		UPDATE caller_queue q SET domains = q.domains + s.n
		FROM started s WHERE q.caller = s.caller AND s.was = 'FAILED'`, id); err != nil {
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
		queueModelAnswer(batch, &r)
	}
	batch.Queue(`
		WITH final AS (
			INSERT INTO classify_job_domain (job_id, position, domain, status, answer, confidence, reasoning,
			                                 source, error, classified_at, provenance_id)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''), NULLIF($9, ''), $10, $11)
			ON CONFLICT (job_id, position) DO NOTHING
			RETURNING 1
		)
		UPDATE classify_job SET done = done + 1 WHERE id = $1 AND EXISTS (SELECT FROM final)`,
		jobID, position, r.Domain, r.Status, answerOrNil(r), confidenceOrNil(r), r.Reasoning, string(r.Source), r.Error, r.ClassifiedAt,
		provenanceOrNil(r))
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
	return jobEnd(ctx, exec, `status = 'COMPLETED', error = NULL, completed_at = now()`,
		`old.status <> 'COMPLETED'`, id)
}

// JobFail marks job id FAILED with a reason (River gave it up). ended is
// false when the job had already ended.
func JobFail(ctx context.Context, exec DBTX, id uuid.UUID, reason string) (end JobEnd, ended bool, err error) {
	return jobEnd(ctx, exec, `status = 'FAILED', error = $2, completed_at = now()`,
		`old.status NOT IN ('COMPLETED', 'FAILED')`, id, reason)
}

// jobEnd sets the job's columns (set) when its old status allows (when),
// and takes its domains off its caller's queued count if they were on it
// (it was PENDING or RUNNING): one statement.
func jobEnd(ctx context.Context, exec DBTX, set, when string, args ...any) (JobEnd, bool, error) {
	var end JobEnd
	err := exec.QueryRow(ctx, `
		WITH old AS (
			SELECT id, status FROM classify_job WHERE id = $1 FOR UPDATE
		), ended AS (
			UPDATE classify_job j SET `+set+`
			FROM old
			WHERE j.id = old.id AND `+when+`
			RETURNING j.status, j.completed_at, coalesce(j.callback_url, '') AS callback_url, j.caller,
			          cardinality(j.domains) AS n, old.status IN ('PENDING', 'RUNNING') AS counted
		), dequeued AS (
			UPDATE caller_queue q SET domains = greatest(q.domains - e.n, 0)
			FROM ended e WHERE q.caller = e.caller AND e.counted
		)
		SELECT status, completed_at, callback_url FROM ended`, args...).Scan(&end.Status, &end.CompletedAt, &end.CallbackURL)
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
// CASCADE), at most batch at a time, and returns how many it deleted. The
// provenance their answers pointed at is named for ProvenancePurge.
// Shared answers (table result) are not touched.
func JobPurge(ctx context.Context, exec DBTX, olderThan time.Duration, batch int) (int64, error) {
	tag, err := exec.Exec(ctx, `
		WITH old AS (
			SELECT id FROM classify_job
			WHERE status IN ('COMPLETED', 'FAILED') AND completed_at < now() - make_interval(secs => $1)
			LIMIT $2
		), candidates AS (
			INSERT INTO provenance_candidate (id)
			SELECT DISTINCT d.provenance_id FROM classify_job_domain d
			WHERE d.job_id IN (SELECT id FROM old) AND d.provenance_id IS NOT NULL
			ON CONFLICT DO NOTHING
		)
		DELETE FROM classify_job WHERE id IN (SELECT id FROM old)`, olderThan.Seconds(), batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}
