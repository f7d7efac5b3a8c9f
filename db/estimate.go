package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// DomainSource yields distinct domains; Err reports why it stopped early.
type DomainSource interface {
	Next() bool
	Domain() string
	Err() error
}

// DomainsAnswered counts, among the distinct domains src yields, those an
// override answers (overridden) and, of the others, those with a cached
// answer
// fresh under f at now: what a list of them would not ask the model about.
// It runs in tx (a temporary table holds the domains, copied as src yields
// them) and writes nothing that outlives it. A source error comes back as
// is.
func DomainsAnswered(ctx context.Context, tx DBTX, classifierName string, src DomainSource, f classifier.Freshness, w classifier.Want, now time.Time) (overridden, cached int, err error) {
	// No key: the source's domains are distinct already.
	if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE estimate_domain (domain text NOT NULL) ON COMMIT DROP`); err != nil {
		return 0, 0, translate(err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"estimate_domain"}, []string{"domain"}, domainRows{src}); err != nil {
		if serr := src.Err(); serr != nil {
			return 0, 0, serr
		}
		return 0, 0, translate(err)
	}
	err = tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE o.domain IS NOT NULL),
		       count(*) FILTER (WHERE o.domain IS NULL AND `+freshResult("r", 2)+`)
		FROM estimate_domain d
		LEFT JOIN override o ON o.classifier = $1 AND o.domain = d.domain
		LEFT JOIN result r ON r.classifier = $1 AND r.domain = d.domain`,
		append([]any{classifierName}, freshArgs(f, w, now)...)...).Scan(&overridden, &cached)
	return overridden, cached, translate(err)
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

type domainRows struct{ src DomainSource }

func (d domainRows) Next() bool             { return d.src.Next() }
func (d domainRows) Values() ([]any, error) { return []any{d.src.Domain()}, nil }
func (d domainRows) Err() error             { return d.src.Err() }
