package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// ResultGet returns the last COMPLETED answer for (domain, classifier), or
// nil when there is none. Freshness is the caller's decision.
func (db *DB) ResultGet(ctx context.Context, classifierName, domain string) (*classifier.Result, error) {
	r := &classifier.Result{Domain: domain, Classifier: classifierName}
	var reasoning *string
	err := db.Pool.QueryRow(ctx, `
		SELECT status, is_cpg, confidence, reasoning, model, prompt_version, evidence, classified_at
		FROM result WHERE domain = $1 AND classifier = $2 AND status = 'COMPLETED'`, domain, classifierName,
	).Scan(&r.Status, &r.Answer, &r.Confidence, &reasoning, &r.Model, &r.PromptVersion, &r.Evidence, &r.ClassifiedAt)
	if err == pgx.ErrNoRows {
		return nil, nil
	} else if err != nil {
		return nil, translate(err)
	}
	r.Reasoning = deref(reasoning)
	return r, nil
}

// KnownCompany returns the name of the known company for (classifier,
// domain) and whether there is one.
func (db *DB) KnownCompany(ctx context.Context, classifierName, domain string) (string, bool, error) {
	var name string
	err := db.Pool.QueryRow(ctx, `SELECT name FROM known_company WHERE classifier = $1 AND domain = $2`,
		classifierName, domain).Scan(&name)
	if err == pgx.ErrNoRows {
		return "", false, nil
	} else if err != nil {
		return "", false, translate(err)
	}
	return name, true, nil
}

// ClaimAcquire takes (classifier, domain) for owner until ttl passes. It
// succeeds when nobody holds it, when the holder's lease ran out (a crashed
// worker), or when owner already holds it (a redelivered job).
func (db *DB) ClaimAcquire(ctx context.Context, classifierName, domain, owner string, ttl time.Duration) (bool, error) {
	rows, err := db.Pool.Query(ctx, `
		INSERT INTO domain_claim (classifier, domain, owner, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (classifier, domain) DO UPDATE
		SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE domain_claim.expires_at < now() OR domain_claim.owner = excluded.owner
		RETURNING 1`, classifierName, domain, owner, ttl.Seconds())
	if err != nil {
		return false, translate(err)
	}
	defer rows.Close()
	acquired := rows.Next()
	return acquired, translate(rows.Err())
}

// ClaimRelease drops owner's claim on (classifier, domain), if it holds one.
func (db *DB) ClaimRelease(ctx context.Context, classifierName, domain, owner string) error {
	_, err := db.Pool.Exec(ctx, `DELETE FROM domain_claim WHERE classifier = $1 AND domain = $2 AND owner = $3`,
		classifierName, domain, owner)
	return translate(err)
}

// KnownCompanyRow is one known company to import.
type KnownCompanyRow struct {
	Domain string
	Name   string
}

// KnownImport upserts known companies for a classifier in one transaction
// and returns how many were new and how many were updated.
func (db *DB) KnownImport(ctx context.Context, classifierName string, rows []KnownCompanyRow) (inserted, updated int, err error) {
	domains := make([]string, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		domains[i], names[i] = r.Domain, r.Name
	}
	err = db.WithTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			WITH up AS (
				INSERT INTO known_company (classifier, domain, name)
				SELECT $1, d, n FROM unnest($2::text[], $3::text[]) AS u (d, n)
				ON CONFLICT (classifier, domain) DO UPDATE SET name = excluded.name, updated_at = now()
				RETURNING (xmax = 0) AS inserted
			)
			SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM up`,
			classifierName, domains, names).Scan(&inserted, &updated)
	})
	return inserted, updated, err
}
