package db

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// JobCreateParams is what an accepted request writes.
type JobCreateParams struct {
	ID          uuid.UUID
	Caller      string
	Classifier  string
	Domains     []classifier.DomainInput
	CallbackURL string
	// IdempotencyKey, when set, makes the request replayable: Fingerprint
	// identifies the request and Response is the 202 body to replay.
	IdempotencyKey string
	Fingerprint    []byte
	Response       []byte
	// MaxQueuedDomains, when positive, refuses the job (ETOOMANY) if the
	// caller's domains not yet final would exceed it.
	MaxQueuedDomains int
	// Admit, when set, is asked once the request is known not to be a
	// replay, before anything is written; its error refuses the job.
	Admit func() error
}

// JobCreateResult is the outcome of JobCreate.
type JobCreateResult struct {
	JobID uuid.UUID
	// Response is the stored 202 body when Replayed.
	Response []byte
	Replayed bool
}

// EnqueueFunc inserts the River job for a new app job inside tx and returns
// its id.
type EnqueueFunc func(ctx context.Context, tx pgx.Tx, jobID uuid.UUID) (int64, error)

// QueuedRetryAfter is the Retry-After of a refusal for too many queued
// domains: jobs of ten domains finish in seconds, so look again soon.
const QueuedRetryAfter = 10 * time.Second

// IdempotencyKeyTTL is how long a key replays its first answer.
const IdempotencyKeyTTL = 24 * time.Hour

// JobCreate writes a job, its domains, the River job (through enqueue) and
// the idempotency key in one transaction: all of it or nothing.
//
// With an idempotency key it returns the first request's stored response
// (Replayed) when the key was used with the same fingerprint, an ECONFLICT
// error while a request with the key is still in flight, and an EINVALID
// error when the key was used with a different request.
func (db *DB) JobCreate(ctx context.Context, p JobCreateParams, enqueue EnqueueFunc) (JobCreateResult, error) {
	res := JobCreateResult{JobID: p.ID}
	err := db.WithTx(ctx, func(tx pgx.Tx) error {
		if p.IdempotencyKey != "" {
			replay, err := idempotencyCheck(ctx, tx, p)
			if err != nil || replay != nil {
				if replay != nil {
					res = *replay
				}
				return err
			}
		}

		if p.Admit != nil {
			if err := p.Admit(); err != nil {
				return err
			}
		}
		// River's job first, so that the job row is written with its id in
		// the same statement that checks the caller's queue: four round trips
		// in all (begin, River, job, commit).
		riverJobID, err := enqueue(ctx, tx, p.ID)
		if err != nil {
			return err
		}

		inputs := make([]string, len(p.Domains))
		domains := make([]string, len(p.Domains))
		for i, d := range p.Domains {
			inputs[i], domains[i] = d.Input, d.Domain
		}
		var (
			queued   int
			inserted bool
		)
		batch := &pgx.Batch{}
		// The caller's domains not yet final, from its unfinished jobs' rows
		// (domains minus done), reading at most MaxQueuedDomains of them
		// however large a backlog grows. The job is written only if it fits.
		batch.Queue(`
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
			p.ID, p.Caller, p.Classifier, p.CallbackURL, inputs, domains, riverJobID, p.MaxQueuedDomains,
		).QueryRow(func(row pgx.Row) error { return row.Scan(&queued, &inserted) })
		if p.IdempotencyKey != "" {
			batch.Queue(`
				INSERT INTO idempotency_key (caller, key, fingerprint, job_id, response)
				SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT FROM classify_job WHERE id = $4)
				ON CONFLICT (caller, key) DO UPDATE
				SET fingerprint = excluded.fingerprint, job_id = excluded.job_id,
				    response = excluded.response, created_at = now()`,
				p.Caller, p.IdempotencyKey, p.Fingerprint, p.ID, p.Response)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		if !inserted {
			atLeast := ""
			if queued == p.MaxQueuedDomains {
				atLeast = "at least "
			}
			return &classifier.Error{
				Code: classifier.ETOOMANY, Type: "too-many-queued", RetryAfter: QueuedRetryAfter,
				Message: fmt.Sprintf("You have %s%d domains queued and not yet answered; the limit is %d. "+
					"Wait for your jobs to finish, then send more.", atLeast, queued, p.MaxQueuedDomains),
			}
		}
		return nil
	})
	return res, err
}

// idempotencyCheck returns the replay for a key already used with the same
// request, nil for a fresh (or expired) key, or an error.
func idempotencyCheck(ctx context.Context, tx pgx.Tx, p JobCreateParams) (*JobCreateResult, error) {
	var locked bool
	if err := tx.QueryRow(ctx,
		// Advisory locks are database-wide: the key names the schema, and the
		// caller by length so that ("a:b", "c") and ("a", "b:c") differ.
		`SELECT pg_try_advisory_xact_lock(hashtextextended(
			'idempotency:' || current_schema() || ':' || length($1) || ':' || $1 || $2, 0))`,
		p.Caller, p.IdempotencyKey,
	).Scan(&locked); err != nil {
		return nil, err
	}
	if !locked {
		return nil, &classifier.Error{
			Code: classifier.ECONFLICT, Type: "idempotency-key-in-flight",
			Message: "A request with this Idempotency-Key is still being processed; retry later.",
		}
	}

	var (
		fingerprint, response []byte
		jobID                 uuid.UUID
	)
	err := tx.QueryRow(ctx, `
		SELECT fingerprint, response, job_id FROM idempotency_key
		WHERE caller = $1 AND key = $2 AND created_at > now() - make_interval(secs => $3)`,
		p.Caller, p.IdempotencyKey, IdempotencyKeyTTL.Seconds(),
	).Scan(&fingerprint, &response, &jobID)
	switch {
	case err == pgx.ErrNoRows:
		return nil, nil
	case err != nil:
		return nil, err
	case !bytes.Equal(fingerprint, p.Fingerprint):
		return nil, &classifier.Error{
			Code: classifier.EINVALID, Type: "idempotency-key-reused",
			Message: "This Idempotency-Key was already used with a different request.",
		}
	}
	return &JobCreateResult{JobID: jobID, Response: response, Replayed: true}, nil
}

// JobGet returns a job with its domains. With caller set, a job of another
// caller is ENOTFOUND, as is an unknown id.
//
// A job whose River job was given up (discarded or cancelled, for instance
// from River UI) before the worker could record it reads as FAILED, with
// River's last error.
func (db *DB) JobGet(ctx context.Context, id uuid.UUID, caller *string) (*classifier.Job, error) {
	j := &classifier.Job{}
	var (
		errMsg, callback *string
		riverID          *int64
		riverState       *string
		riverErrors      []byte
	)
	err := db.Pool.QueryRow(ctx, `
		SELECT j.id, j.caller, j.classifier, j.status, j.error, j.callback_url, j.river_job_id,
		       j.created_at, j.started_at, j.completed_at,
		       rj.state::text, rj.errors[array_upper(rj.errors, 1)]
		FROM classify_job j
		LEFT JOIN river_job rj ON rj.id = j.river_job_id
		WHERE j.id = $1 AND ($2::text IS NULL OR j.caller = $2)`, id, caller,
	).Scan(&j.ID, &j.Caller, &j.Classifier, &j.Status, &errMsg, &callback, &riverID,
		&j.CreatedAt, &j.StartedAt, &j.CompletedAt, &riverState, &riverErrors)
	if err != nil {
		return nil, translate(err)
	}
	j.Error, j.CallbackURL = deref(errMsg), deref(callback)
	if riverID != nil {
		j.RiverJobID = *riverID
	}
	if (j.Status == classifier.StatusPending || j.Status == classifier.StatusRunning) && riverState != nil &&
		(*riverState == "discarded" || *riverState == "cancelled") {
		j.Status = classifier.StatusFailed
		j.Error = "the job was " + *riverState
		var last struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(riverErrors, &last) == nil && last.Error != "" {
			j.Error += ": " + last.Error
		}
	}

	if j.Domains, err = jobDomains(ctx, db.Pool, id, j.Classifier); err != nil {
		return nil, err
	}
	return j, nil
}

// querier runs a query on a pool or in a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func jobDomains(ctx context.Context, q querier, jobID uuid.UUID, classifierName string) ([]classifier.JobDomain, error) {
	rows, err := q.Query(ctx, `
		SELECT u.ord - 1, u.input, u.domain, coalesce(d.status, 'PENDING'), d.is_cpg, d.confidence, d.reasoning,
		       d.source, d.error, d.classified_at
		FROM classify_job j
		CROSS JOIN LATERAL unnest(j.inputs, j.domains) WITH ORDINALITY AS u (input, domain, ord)
		LEFT JOIN classify_job_domain d ON d.job_id = j.id AND d.position = u.ord - 1
		WHERE j.id = $1
		ORDER BY u.ord`, jobID)
	if err != nil {
		return nil, translate(err)
	}
	var out []classifier.JobDomain
	for rows.Next() {
		var (
			d                        classifier.JobDomain
			isCPG                    *bool
			confidence               *int16
			reasoning, source, error *string
			classifiedAt             *time.Time
		)
		if err := rows.Scan(&d.Position, &d.Input, &d.Result.Domain, &d.Result.Status, &isCPG, &confidence,
			&reasoning, &source, &error, &classifiedAt); err != nil {
			return nil, translate(err)
		}
		d.Result.Classifier = classifierName
		d.Result.ClassifiedAt = deref(classifiedAt)
		if isCPG != nil {
			d.Result.Answer = *isCPG
		}
		if confidence != nil {
			d.Result.Confidence = int(*confidence)
		}
		d.Result.Reasoning, d.Result.Source, d.Result.Error = deref(reasoning), classifier.Source(deref(source)), deref(error)
		out = append(out, d)
	}
	return out, translate(rows.Err())
}

// JobStart marks a job RUNNING when it is PENDING, or FAILED and retried by
// an operator. It returns the job with its domains.
func (db *DB) JobStart(ctx context.Context, id uuid.UUID) (*classifier.Job, error) {
	if _, err := db.Pool.Exec(ctx, `
		UPDATE classify_job
		SET status = 'RUNNING', started_at = coalesce(started_at, now()), error = NULL, completed_at = NULL
		WHERE id = $1 AND status IN ('PENDING', 'FAILED')`, id); err != nil {
		return nil, translate(err)
	}
	return db.JobGet(ctx, id, nil)
}

// JobDomainFinish stores the final answer of the domain at position in a
// job and, for an answer from the model, upserts the shared result on
// (domain, classifier) and releases owner's claim on the domain, all in one
// transaction. A domain already final for the job keeps its first answer
// (a redelivered job). A FAILED answer never replaces a COMPLETED one in the
// shared results.
func (db *DB) JobDomainFinish(ctx context.Context, jobID uuid.UUID, position int, r classifier.Result, owner string) error {
	return db.WithTx(ctx, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		if r.Source == classifier.SourceLLM {
			batch.Queue(`
				INSERT INTO result (domain, classifier, status, is_cpg, confidence, reasoning, error,
				                    model, prompt_version, evidence, classified_at)
				VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), $8, $9, $10, $11)
				ON CONFLICT (domain, classifier) DO UPDATE
				SET status = excluded.status, is_cpg = excluded.is_cpg, confidence = excluded.confidence,
				    reasoning = excluded.reasoning, error = excluded.error, model = excluded.model,
				    prompt_version = excluded.prompt_version, evidence = excluded.evidence,
				    classified_at = excluded.classified_at
				WHERE excluded.status = 'COMPLETED' OR result.status = 'FAILED'`,
				r.Domain, r.Classifier, r.Status, answerOrNil(r), confidenceOrNil(r), r.Reasoning, r.Error,
				r.Model, r.PromptVersion, nonNil(r.Evidence), r.ClassifiedAt)
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
		batch.Queue(`DELETE FROM domain_claim WHERE classifier = $1 AND domain = $2 AND owner = $3`,
			r.Classifier, r.Domain, owner)
		return tx.SendBatch(ctx, batch).Close()
	})
}

// JobEndFunc runs inside the transaction that ends a job; ended is false
// when the job had already ended (a redelivery), so that follow-up work such
// as a webhook is queued exactly once per end.
type JobEndFunc func(ctx context.Context, tx pgx.Tx, ended bool) error

// JobComplete marks a job COMPLETED and runs then in the same transaction.
func (db *DB) JobComplete(ctx context.Context, id uuid.UUID, then JobEndFunc) error {
	return db.jobEnd(ctx, `
		UPDATE classify_job SET status = 'COMPLETED', error = NULL, completed_at = now()
		WHERE id = $1 AND status <> 'COMPLETED'`, then, id)
}

// JobFail marks a job FAILED with a reason (River gave it up) and runs then
// in the same transaction.
func (db *DB) JobFail(ctx context.Context, id uuid.UUID, reason string, then JobEndFunc) error {
	return db.jobEnd(ctx, `
		UPDATE classify_job SET status = 'FAILED', error = $2, completed_at = now()
		WHERE id = $1 AND status NOT IN ('COMPLETED', 'FAILED')`, then, id, reason)
}

func (db *DB) jobEnd(ctx context.Context, sql string, then JobEndFunc, args ...any) error {
	return db.WithTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(ctx, tx, tag.RowsAffected() == 1)
	})
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

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// IdempotencyKeyPurge deletes keys older than IdempotencyKeyTTL, at most
// batch at a time, and returns how many it deleted.
func (db *DB) IdempotencyKeyPurge(ctx context.Context, batch int) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `
		DELETE FROM idempotency_key WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_key
			WHERE created_at < now() - make_interval(secs => $1)
			LIMIT $2))`, IdempotencyKeyTTL.Seconds(), batch)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}
