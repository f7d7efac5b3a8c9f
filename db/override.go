package db

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// OverrideSet sets overrides, each replacing any override of its
// (classifier, domain), in one statement: all or none. Each gets a new
// provenance row (who, why, when) that the answers it gives point at; rows
// answered by an earlier override keep pointing at that one's. It returns
// how many overrides were new and how many replaced one.
func OverrideSet(ctx context.Context, exec DBTX, overrides []classifier.Override) (inserted, updated int, err error) {
	n := len(overrides)
	var (
		ids                  = make([]uuid.UUID, n)
		classifiers, domains = make([]string, n), make([]string, n)
		answers              = make([]bool, n)
		confidences          = make([]int32, n)
		notes, setBy         = make([]string, n), make([]string, n)
	)
	for i, o := range overrides {
		ids[i] = uuid.Must(uuid.NewV7())
		classifiers[i], domains[i], answers[i], confidences[i] = o.Classifier, o.Domain, o.Answer, int32(o.Confidence)
		notes[i], setBy[i] = o.Note, o.SetBy
	}
	err = exec.QueryRow(ctx, `
		WITH o AS (
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bool[], $5::int[], $6::text[], $7::text[])
			    AS u (id, classifier, domain, answer, confidence, note, set_by)
		), p AS (
			INSERT INTO provenance (id, set_by, note, created_at) SELECT id, set_by, note, now() FROM o
		), up AS (
			INSERT INTO override (classifier, domain, answer, confidence, note, set_by, set_at, provenance_id)
			SELECT classifier, domain, answer, confidence, note, set_by, now(), id FROM o
			ON CONFLICT (classifier, domain) DO UPDATE
			SET answer = excluded.answer, confidence = excluded.confidence, note = excluded.note,
			    set_by = excluded.set_by, set_at = excluded.set_at, provenance_id = excluded.provenance_id
			RETURNING (xmax = 0) AS inserted
		)
		SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM up`,
		ids, classifiers, domains, answers, confidences, notes, setBy).Scan(&inserted, &updated)
	return inserted, updated, translate(err)
}

const overrideColumns = `classifier, domain, answer, confidence, note, set_by, set_at, provenance_id`

func scanOverride(row pgx.CollectableRow) (classifier.Override, error) {
	var o classifier.Override
	err := row.Scan(&o.Classifier, &o.Domain, &o.Answer, &o.Confidence, &o.Note, &o.SetBy, &o.SetAt, &o.ProvenanceID)
	return o, err
}

// OverrideGet returns the override of (classifier, domain), or ErrNotFound.
func OverrideGet(ctx context.Context, exec DBTX, classifierName, domain string) (classifier.Override, error) {
	rows, err := exec.Query(ctx, `SELECT `+overrideColumns+` FROM override WHERE classifier = $1 AND domain = $2`,
		classifierName, domain)
	if err != nil {
		return classifier.Override{}, translate(err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOverride)
	return o, translate(err)
}

// OverrideList returns the overrides of a classifier ("" for every
// classifier's), by classifier and domain.
func OverrideList(ctx context.Context, exec DBTX, classifierName string) ([]classifier.Override, error) {
	rows, err := exec.Query(ctx, `SELECT `+overrideColumns+` FROM override
		WHERE $1 = '' OR classifier = $1 ORDER BY classifier, domain`, classifierName)
	return collect(rows, err, scanOverride)
}

// OverrideDelete deletes the override of (classifier, domain), or returns
// ErrNotFound when there is none. The rows it answered keep its
// provenance.
func OverrideDelete(ctx context.Context, exec DBTX, classifierName, domain string) error {
	tag, err := exec.Exec(ctx, `DELETE FROM override WHERE classifier = $1 AND domain = $2`, classifierName, domain)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
