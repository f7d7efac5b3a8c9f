package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// DomainsAnswered counts, among distinct domains, those a known company
// answers and, of the others, those with a cached answer fresh under f at
// now: what a list of them would not ask the model about. It runs in tx
// (a temporary table holds the domains) and writes nothing that outlives it.
func DomainsAnswered(ctx context.Context, tx DBTX, classifierName string, domains []string, f classifier.Freshness, now time.Time) (known, cached int, err error) {
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE estimate_domain (domain text PRIMARY KEY) ON COMMIT DROP`); err != nil {
		return 0, 0, translate(err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"estimate_domain"}, []string{"domain"},
		pgx.CopyFromSlice(len(domains), func(i int) ([]any, error) { return []any{domains[i]}, nil })); err != nil {
		return 0, 0, translate(err)
	}
	err = tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE k.domain IS NOT NULL),
		       count(*) FILTER (WHERE k.domain IS NULL AND r.status = 'COMPLETED' AND (
		           (r.confidence >= 4 AND $3::float8 > 0 AND r.classified_at > $2::timestamptz - make_interval(secs => $3)) OR
		           (r.confidence BETWEEN 2 AND 3 AND $4::float8 > 0 AND r.classified_at > $2::timestamptz - make_interval(secs => $4)) OR
		           (r.confidence = 1 AND $5::float8 > 0 AND r.classified_at > $2::timestamptz - make_interval(secs => $5))))
		FROM estimate_domain d
		LEFT JOIN known_company k ON k.classifier = $1 AND k.domain = d.domain
		LEFT JOIN result r ON r.classifier = $1 AND r.domain = d.domain`,
		classifierName, now, f.High.Seconds(), f.Medium.Seconds(), f.Low.Seconds()).Scan(&known, &cached)
	return known, cached, translate(err)
}

// ModelStats is what recent model calls cost: the median latency and the
// mean tokens of the last Samples answers from the model (0 when none).
type ModelStats struct {
	Samples          int
	MedianLatency    time.Duration
	PromptTokens     float64
	CompletionTokens float64
}

// ModelStatsRecent reads ModelStats over the last n answers from the model.
func ModelStatsRecent(ctx context.Context, exec DBTX, classifierName string, n int) (ModelStats, error) {
	var (
		s      ModelStats
		median *float64
		p, c   *float64
	)
	err := exec.QueryRow(ctx, `
		SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms), avg(prompt_tokens), avg(completion_tokens)
		FROM (SELECT latency_ms, prompt_tokens, completion_tokens FROM result
		      WHERE classifier = $1 AND latency_ms IS NOT NULL ORDER BY classified_at DESC LIMIT $2) recent`,
		classifierName, n).Scan(&s.Samples, &median, &p, &c)
	if err != nil {
		return s, translate(err)
	}
	s.MedianLatency = time.Duration(deref(median) * float64(time.Millisecond))
	s.PromptTokens, s.CompletionTokens = deref(p), deref(c)
	return s, nil
}
