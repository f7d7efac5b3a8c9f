package db

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
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

// ClaimAcquire takes (classifier, domain) for owner until ttl passes (batch:
// for a provider batch's window). It succeeds when nobody holds it, when the
// holder's lease ran out (a crashed worker), or when owner already holds it
// (a redelivered job). Otherwise it returns the live claim's holder, as of
// the statement's start: zero when the claim was taken meanwhile.
func ClaimAcquire(ctx context.Context, exec DBTX, classifierName, domain, owner string, ttl time.Duration, batch bool) (classifier.ClaimHolder, bool, error) {
	var (
		h    classifier.ClaimHolder
		took bool
		age  float64
	)
	err := exec.QueryRow(ctx, `
		WITH taken AS (
			INSERT INTO domain_claim (classifier, domain, owner, expires_at, batch)
			VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5)
			ON CONFLICT (classifier, domain) DO UPDATE
			SET owner = excluded.owner, expires_at = excluded.expires_at, batch = excluded.batch,
			    claimed_at = CASE WHEN domain_claim.owner = excluded.owner THEN domain_claim.claimed_at ELSE now() END
			WHERE domain_claim.expires_at < now() OR domain_claim.owner = excluded.owner
			RETURNING 1
		)
		SELECT true, '', false, 0::float8 FROM taken
		UNION ALL
		SELECT false, owner, batch, extract(epoch FROM now() - claimed_at)::float8 FROM domain_claim
		WHERE classifier = $1 AND domain = $2 AND NOT EXISTS (SELECT FROM taken)`,
		classifierName, domain, owner, ttl.Seconds(), batch).Scan(&took, &h.Owner, &h.Batch, &age)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, false, nil // claimed by another since the statement began
	} else if err != nil {
		return h, false, translate(err)
	}
	h.Age = time.Duration(age * float64(time.Second))
	return h, took, nil
}

// ClaimTakeOver moves the claim on (classifier, domain) from holder to
// owner, as a call's claim until ttl passes. It reports false when holder
// no longer holds it.
func ClaimTakeOver(ctx context.Context, exec DBTX, classifierName, domain, holder, owner string, ttl time.Duration) (bool, error) {
	tag, err := exec.Exec(ctx, `
		UPDATE domain_claim SET owner = $4, batch = false, claimed_at = now(), expires_at = now() + make_interval(secs => $5)
		WHERE classifier = $1 AND domain = $2 AND owner = $3`,
		classifierName, domain, holder, owner, ttl.Seconds())
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

// ClaimListRows takes, for owner until ttl passes, the domains of list
// listID's pending first rows from..to (the domains its chunk has still to
// answer), as ClaimAcquire takes one: those nobody holds, whose holder's
// lease ran out, or that owner holds already. One statement; it returns
// the domains taken. The others are another's (a job's call, another
// list's, a provider batch's): the chunk answers them one at a time.
//
// The domains are taken in their order, as every set of claims is, so that
// two chunks claiming domains they share wait for one another rather than
// deadlock.
func ClaimListRows(ctx context.Context, exec DBTX, listID uuid.UUID, classifierName string, from, to int, owner string, ttl time.Duration) ([]string, error) {
	rows, err := exec.Query(ctx, `
		INSERT INTO domain_claim (classifier, domain, owner, expires_at, batch)
		SELECT $2, domain, $5, now() + make_interval(secs => $6), false FROM list_row
		WHERE list_id = $1 AND row BETWEEN $3 AND $4 AND status = 'PENDING' AND first_row IS NULL
		ORDER BY domain
		ON CONFLICT (classifier, domain) DO UPDATE
		SET owner = excluded.owner, expires_at = excluded.expires_at, batch = false,
		    claimed_at = CASE WHEN domain_claim.owner = excluded.owner THEN domain_claim.claimed_at ELSE now() END
		WHERE domain_claim.expires_at < now() OR domain_claim.owner = excluded.owner
		RETURNING domain`, listID, classifierName, from, to, owner, ttl.Seconds())
	return collect(rows, err, func(row pgx.CollectableRow) (string, error) {
		var d string
		return d, row.Scan(&d)
	})
}

// DomainClaimsRelease drops owner's claims on domains (those it holds):
// one statement, for the domains a chunk claimed and did not answer.
func DomainClaimsRelease(ctx context.Context, exec DBTX, classifierName string, domains []string, owner string) error {
	if len(domains) == 0 {
		return nil
	}
	_, err := exec.Exec(ctx, `DELETE FROM domain_claim WHERE classifier = $1 AND domain = ANY($2) AND owner = $3`,
		classifierName, domains, owner)
	return translate(err)
}
