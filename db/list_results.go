package db

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/domainclass/domainclass/classifier"
)

// ListResultsParams selects the rows of a list to read for a download.
type ListResultsParams struct {
	ListID uuid.UUID
	// After and Through bound the rows read: those numbered in (After,
	// Through]. Rows are numbered 1..rows without gaps, so a range of n
	// numbers holds at most n rows, found by the primary key, whatever
	// Statuses keeps of them.
	After, Through int
	// Statuses keeps only rows in these statuses, as callers see them
	// (CANCELLED included); none keeps every row.
	Statuses []classifier.Status
	// List is the list's own status and error: rows not final in a
	// CANCELLED list are reported CANCELLED, in a FAILED one FAILED. A
	// download reads them once and passes the same to every page, so that
	// its rows agree with one another.
	ListStatus classifier.Status
	ListError  string
	// URLsOnly reads what a CSV shows: each answer's model, prompt version
	// and evidence addresses (items with only URL set), kept on the row, so
	// that no provenance is joined and no JSON decoded.
	URLsOnly bool
}

// ListResultsPage reads one page of a list's rows for a download, in row
// order, in one short query on exec: the rows of p's range that p keeps go
// to fn as they are read. fn does not keep the row (the same one is reused)
// and returns false to end the page after it (its buffer is full). A
// download takes a connection for each page and gives it back before it
// writes the page to its client, so that no connection waits on a client.
//
// It returns the row the next page starts after: p.Through, or the row fn
// ended the page at. It returns an error when the query fails.
func ListResultsPage(ctx context.Context, exec DBTX, p ListResultsParams, fn func(*classifier.ListRow) bool) (next int, err error) {
	statuses := make([]string, len(p.Statuses))
	for i, s := range p.Statuses {
		statuses[i] = string(s)
	}
	// NDJSON carries the whole evidence, from provenance; a CSV shows what
	// the row keeps.
	columns, join := provenanceColumns, `LEFT JOIN provenance p ON p.id = r.provenance_id`
	if p.URLsOnly {
		columns, join = `r.provenance_id, coalesce(r.model, ''), coalesce(r.prompt_version, ''), coalesce(r.evidence_urls, '')`, ""
	}
	rows, err := exec.Query(ctx, `
		SELECT row, input, coalesce(ref, ''), coalesce(domain, ''), shown, answer, confidence,
		       coalesce(reasoning, ''), coalesce(source, ''),
		       CASE WHEN status = 'PENDING' AND shown = 'FAILED' THEN $5 ELSE coalesce(error, '') END,
		       classified_at, `+columns+`
		FROM (
			SELECT *, CASE WHEN status = 'PENDING' AND $3 IN ('CANCELLED', 'FAILED') THEN $3 ELSE status END AS shown
			FROM list_row WHERE list_id = $1 AND row > $2 AND row <= $6
		) r
		`+join+`
		WHERE cardinality($4::text[]) = 0 OR shown = ANY($4)
		ORDER BY row`, p.ListID, p.After, string(p.ListStatus), statuses, p.ListError, p.Through)
	if err != nil {
		return p.After, translate(err)
	}
	defer rows.Close()
	var (
		r            classifier.ListRow
		answer       *bool
		confidence   *int16
		classifiedAt *time.Time
		provenance   pgtype.UUID
		urls         string
		items        []classifier.EvidenceItem
	)
	for rows.Next() {
		r.Result.Evidence = nil // scanning JSON into a used slice would reuse it
		dest := []any{&r.Row, &r.Input, &r.Ref, &r.Result.Domain, &r.Result.Status, &answer, &confidence,
			&r.Result.Reasoning, &r.Result.Source, &r.Result.Error, &classifiedAt}
		if p.URLsOnly {
			dest = append(dest, &provenance, &r.Result.Model, &r.Result.PromptVersion, &urls)
		} else {
			dest = append(dest, provenanceDest(&r.Result, &provenance)...)
		}
		if err := rows.Scan(dest...); err != nil {
			return p.After, translate(err)
		}
		if p.URLsOnly {
			// fn does not keep the row, so one slice serves every row.
			items = items[:0]
			for u := range strings.FieldsSeq(urls) {
				items = append(items, classifier.EvidenceItem{URL: u})
			}
			r.Result.Evidence = items
		}
		r.Result.ProvenanceID = provenance.Bytes
		r.Result.Answer, r.Result.Confidence, r.Result.ClassifiedAt = deref(answer), int(deref(confidence)), deref(classifiedAt)
		if !fn(&r) {
			rows.Close()
			return r.Row, translate(rows.Err())
		}
	}
	if err := rows.Err(); err != nil {
		return p.After, translate(err)
	}
	return p.Through, nil
}
