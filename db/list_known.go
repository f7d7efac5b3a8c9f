package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// freshResult is the SQL condition under which result r (an alias) is a
// cached answer fresh under a Freshness and a Want: Freshness.Fresh and
// Want.Accepts, as one predicate. Its six parameters start at $p, in the
// order freshArgs gives them: now, the High, Medium and Low TTLs, MaxAge
// and Since.
func freshResult(r string, p int) string {
	now, high, medium, low, maxAge, since := p, p+1, p+2, p+3, p+4, p+5
	return fmt.Sprintf(`(%[1]s.status = 'COMPLETED' AND (
	       (%[1]s.confidence >= 4 AND $%[3]d::float8 > 0 AND %[1]s.classified_at > $%[2]d::timestamptz - make_interval(secs => $%[3]d)) OR
	       (%[1]s.confidence BETWEEN 2 AND 3 AND $%[4]d::float8 > 0 AND %[1]s.classified_at > $%[2]d::timestamptz - make_interval(secs => $%[4]d)) OR
	       (%[1]s.confidence = 1 AND $%[5]d::float8 > 0 AND %[1]s.classified_at > $%[2]d::timestamptz - make_interval(secs => $%[5]d)))
	   AND ($%[6]d::float8 = 0 OR %[1]s.classified_at > $%[2]d::timestamptz - make_interval(secs => $%[6]d))
	   AND ($%[7]d::timestamptz IS NULL OR %[1]s.classified_at >= $%[7]d))`, r, now, high, medium, low, maxAge, since)
}

// freshArgs are freshResult's parameters.
func freshArgs(f classifier.Freshness, w classifier.Want, now time.Time) []any {
	return []any{now, f.High.Seconds(), f.Medium.Seconds(), f.Low.Seconds(), w.MaxAge.Seconds(), sinceOrNil(w)}
}

// Known is what ListAnswerKnown answered: the domains (a list's first
// rows) an override answered and those a cached answer did, and every row
// it made final, their duplicates counted.
type Known struct {
	Override, Cache int
	Rows            int
}

// ListAnswerKnown answers, in one transaction, every PENDING row from..to of
// list listID whose domain an override answers or a cached answer fresh
// under f and w at now does, and counts them in the list's progress: what
// the chunk would otherwise look up and store a domain at a time (the
// pipeline's cheap answers, with the same rules). A row it answers reads
// as one the pipeline answered: the override's verdict (who set it and
// why) or the cached answer with its model, prompt and evidence. A row
// already final is left as it is. A duplicate is answered by its own
// domain, which is its first row's: in one statement, the same answer.
//
// Each source is one UPDATE joined to its table, never to list_row again:
// whatever list_row's statistics say (a list just uploaded has none), the
// planner reads the range's rows once and looks each domain up, or reads
// the source's table once; no plan reads the whole list per range.
func ListAnswerKnown(ctx context.Context, exec DBTX, listID uuid.UUID, classifierName string, from, to int,
	f classifier.Freshness, w classifier.Want, now time.Time) (Known, error) {
	var overridden, cached [2]int
	batch := &pgx.Batch{}
	queueProvenanceHold(batch)
	// The overrides first: the cache's statement, which sees what the
	// first wrote (one transaction), then finds those rows final.
	batch.Queue(`
		WITH answered AS (
			UPDATE list_row t SET status = 'COMPLETED', answer = o.answer, confidence = o.confidence,
			       reasoning = `+overrideReasoning+`, source = 'override', error = NULL,
			       classified_at = o.set_at, provenance_id = o.provenance_id, model = NULL, prompt_version = NULL, evidence_urls = ''
			FROM override o
			WHERE t.list_id = $1 AND t.row BETWEEN $3 AND $4 AND t.status = 'PENDING'
			  AND o.classifier = $2 AND o.domain = t.domain
			RETURNING t.first_row IS NULL AS first
		)`+countKnown("override"), listID, classifierName, from, to).QueryRow(func(row pgx.Row) error {
		return row.Scan(&overridden[0], &overridden[1])
	})
	batch.Queue(`
		WITH answered AS (
			UPDATE list_row t SET status = 'COMPLETED', answer = r.answer, confidence = r.confidence, reasoning = r.reasoning,
			       source = 'cache', error = NULL, classified_at = r.classified_at, provenance_id = r.provenance_id,
			       model = NULLIF(p.model, ''), prompt_version = NULLIF(p.prompt_version, ''),
			       evidence_urls = `+cacheEvidenceURLs+`
			FROM result r LEFT JOIN provenance p ON p.id = r.provenance_id
			WHERE t.list_id = $1 AND t.row BETWEEN $3 AND $4 AND t.status = 'PENDING'
			  AND r.classifier = $2 AND r.domain = t.domain AND `+freshResult("r", 5)+`
			RETURNING t.first_row IS NULL AS first
		)`+countKnown("cache"),
		append([]any{listID, classifierName, from, to}, freshArgs(f, w, now)...)...).QueryRow(func(row pgx.Row) error {
		return row.Scan(&cached[0], &cached[1])
	})
	queueProvenanceRelease(batch)
	err := exec.SendBatch(ctx, batch).Close()
	return Known{Override: overridden[0], Cache: cached[0], Rows: overridden[1] + cached[1]}, translate(err)
}

// overrideReasoning is the reasoning of a row an override o answers, and
// cacheEvidenceURLs the evidence addresses of one a cached answer r answers
// (its provenance p's, in their order; NULL without provenance): the same
// in ListAnswerKnown and ListRowsAccept.
const (
	overrideReasoning = `'Set by ' || o.set_by || ': ' || o.note`
	cacheEvidenceURLs = `CASE WHEN r.provenance_id IS NOT NULL THEN coalesce(
	           (SELECT string_agg(e.item->>'url', ' ' ORDER BY e.n)
	            FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS e (item, n)), '') END`
)

// countKnown ends a statement whose CTE answered has answered rows from
// source: it counts them in list $1's progress and returns how many
// domains (first rows) and rows it answered.
func countKnown(source string) string {
	return fmt.Sprintf(`, n AS (
			SELECT count(*) FILTER (WHERE first)::int AS domains, count(*)::int AS rows FROM answered
		), counted AS (
			UPDATE list SET done = done + n.rows, completed = completed + n.rows, %[1]s = %[1]s + n.rows
			FROM n WHERE list.id = $1 AND n.rows > 0
		)
		SELECT domains, rows FROM n`, source)
}

// provenanceLockKey is the schema's provenance lock: the purge holds it
// exclusively while it deletes provenance, a statement that writes many
// rows' provenance ids at once holds it shared (migration 00020).
const provenanceLockKey = `hashtextextended('provenance:' || current_schema(), 0)`

// queueProvenanceHold queues the start of a set-based write of provenance
// ids: the purge held off until the transaction ends (the batch's own, or
// the caller's), and the row-by-row check of list_row skipped meanwhile.
// The ids written must come from foreign keys read after it (a result's,
// an override's) or from provenance rows written in the same transaction.
func queueProvenanceHold(batch *pgx.Batch) {
	batch.Queue(`SELECT pg_advisory_xact_lock_shared(` + provenanceLockKey + `), set_config('domainclass.provenance_held', 'on', true)`)
}

// queueProvenanceRelease queues the end of the set-based write: later
// statements of the transaction are checked row by row again.
func queueProvenanceRelease(batch *pgx.Batch) {
	batch.Queue(`SELECT set_config('domainclass.provenance_held', 'off', true)`)
}
