package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/domainclass/domainclass/classifier"
)

// ResultGet returns the last COMPLETED answer for (domain, classifier), or
// ErrNotFound. Freshness is the caller's decision.
func ResultGet(ctx context.Context, exec DBTX, classifierName, domain string) (*classifier.Result, error) {
	r := &classifier.Result{Domain: domain, Classifier: classifierName}
	var (
		reasoning *string
		id        pgtype.UUID
	)
	err := exec.QueryRow(ctx, `
		SELECT r.status, r.answer, r.confidence, r.reasoning, r.classified_at, `+provenanceColumns+`
		FROM result r LEFT JOIN provenance p ON p.id = r.provenance_id
		WHERE r.domain = $1 AND r.classifier = $2 AND r.status = 'COMPLETED'`, domain, classifierName,
	).Scan(append([]any{&r.Status, &r.Answer, &r.Confidence, &reasoning, &r.ClassifiedAt}, provenanceDest(r, &id)...)...)
	if err != nil {
		return nil, translate(err)
	}
	r.Reasoning, r.ProvenanceID = deref(reasoning), id.Bytes
	return r, nil
}

// queueResultUpsert queues the upsert of a model's answer as the shared
// result of (domain, classifier); its provenance is queued first
// (queueModelAnswer). A FAILED answer never replaces a COMPLETED one.
func queueResultUpsert(batch *pgx.Batch, r classifier.Result) {
	var latencyMS, promptTokens, completionTokens *int64
	if u := r.Usage; u != nil {
		l, p, c := u.Latency.Milliseconds(), int64(u.PromptTokens), int64(u.CompletionTokens)
		latencyMS, promptTokens, completionTokens = &l, &p, &c
	}
	batch.Queue(`
		INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, error,
		                    provenance_id, classified_at, latency_ms, prompt_tokens, completion_tokens, batch_id)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), $8, $9, $10, $11, $12, NULLIF($13, ''))
		ON CONFLICT (domain, classifier) DO UPDATE
		SET status = excluded.status, answer = excluded.answer, confidence = excluded.confidence,
		    reasoning = excluded.reasoning, error = excluded.error, provenance_id = excluded.provenance_id,
		    classified_at = excluded.classified_at, latency_ms = excluded.latency_ms,
		    prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
		    batch_id = excluded.batch_id
		WHERE excluded.status = 'COMPLETED' OR result.status = 'FAILED'`,
		r.Domain, r.Classifier, r.Status, answerOrNil(r), confidenceOrNil(r), r.Reasoning, r.Error,
		r.ProvenanceID, r.ClassifiedAt, latencyMS, promptTokens, completionTokens, r.BatchID)
}

// ClaimAcquire takes (classifier, domain) for owner until ttl passes. It
// succeeds when nobody holds it, when the holder's lease ran out (a crashed
// worker), or when owner already holds it (a redelivered job).
func ClaimAcquire(ctx context.Context, exec DBTX, classifierName, domain, owner string, ttl time.Duration) (bool, error) {
	tag, err := exec.Exec(ctx, `
		INSERT INTO domain_claim (classifier, domain, owner, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (classifier, domain) DO UPDATE
		SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE domain_claim.expires_at < now() OR domain_claim.owner = excluded.owner`,
		classifierName, domain, owner, ttl.Seconds())
	if err != nil {
		return false, translate(err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimRelease drops owner's claim on (classifier, domain), if it holds one.
func ClaimRelease(ctx context.Context, exec DBTX, classifierName, domain, owner string) error {
	batch := &pgx.Batch{}
	queueClaimRelease(batch, classifierName, domain, owner)
	return translate(exec.SendBatch(ctx, batch).Close())
}

func queueClaimRelease(batch *pgx.Batch, classifierName, domain, owner string) {
	batch.Queue(`DELETE FROM domain_claim WHERE classifier = $1 AND domain = $2 AND owner = $3`,
		classifierName, domain, owner)
}
