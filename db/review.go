package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// The review queue (issue 39) is filled by the database: triggers on
// result queue the model's answers by their classifier's rules as they are
// stored (db/migrations/00018_review.sql), and ReviewDispute queues a
// caller's dispute. A verdict is an override, set here in the same
// transaction as the item's verdict.

// ReviewRulesGet returns the review rules of the named classifiers, the
// defaults for those without rules set.
func ReviewRulesGet(ctx context.Context, exec DBTX, names []string) ([]classifier.ReviewRules, error) {
	rows, err := exec.Query(ctx, `
		SELECT n.name, coalesce(r.low_confidence, $2), coalesce(r.audit_rate, $3),
		       coalesce(r.updated_by, ''), coalesce(r.updated_at, 'epoch')
		FROM unnest($1::text[]) WITH ORDINALITY AS n (name, i)
		LEFT JOIN review_rule r ON r.classifier = n.name
		ORDER BY n.i`, names, classifier.DefaultReviewLowConfidence, classifier.DefaultReviewAuditRate)
	return collect(rows, err, func(row pgx.CollectableRow) (classifier.ReviewRules, error) {
		var r classifier.ReviewRules
		err := row.Scan(&r.Classifier, &r.LowConfidence, &r.AuditRate, &r.UpdatedBy, &r.UpdatedAt)
		if r.UpdatedBy == "" {
			r.UpdatedAt = time.Time{}
		}
		return r, err
	})
}

// ReviewRulesSet sets a classifier's review rules; they apply to the
// answers stored from then on.
func ReviewRulesSet(ctx context.Context, exec DBTX, r classifier.ReviewRules) error {
	_, err := exec.Exec(ctx, `
		INSERT INTO review_rule (classifier, low_confidence, audit_rate, updated_by, updated_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (classifier) DO UPDATE
		SET low_confidence = excluded.low_confidence, audit_rate = excluded.audit_rate,
		    updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		r.Classifier, r.LowConfidence, r.AuditRate, r.UpdatedBy)
	return translate(err)
}

const reviewItemColumns = `i.id, i.classifier, i.domain, i.provenance_id, i.reasons, i.answer, i.confidence, i.reasoning,
	i.source, i.answered_at, coalesce(p.model, ''), coalesce(p.prompt_version, ''), coalesce(p.search, ''),
	coalesce(p.evidence, '[]'), i.queued_at, i.verdict, coalesce(i.note, ''), coalesce(i.reviewer, ''), i.reviewed_at,
	ARRAY(SELECT d.note FROM review_dispute d WHERE d.item_id = i.id ORDER BY d.id)`

func scanReviewItem(row pgx.CollectableRow) (classifier.ReviewItem, error) {
	var it classifier.ReviewItem
	err := row.Scan(&it.ID, &it.Classifier, &it.Domain, &it.ProvenanceID, &it.Reasons, &it.Answer, &it.Confidence,
		&it.Reasoning, &it.Source, &it.AnsweredAt, &it.Model, &it.PromptVersion, &it.Search, &it.Evidence,
		&it.QueuedAt, &it.Verdict, &it.Note, &it.Reviewer, &it.ReviewedAt, &it.Disputes)
	return it, err
}

// ReviewNext returns the next queued item of a classifier, leaving out the
// items of exclude (those a reviewer's page already shows): disputed ones
// first (a caller waits), then the oldest; a skipped item after those
// never skipped, the longest skipped first. It returns ErrNotFound when
// the queue has no other item.
func ReviewNext(ctx context.Context, exec DBTX, classifierName string, exclude []int64) (classifier.ReviewItem, error) {
	if exclude == nil {
		exclude = []int64{} // <> ALL(NULL) is never true
	}
	rows, err := exec.Query(ctx, `
		SELECT `+reviewItemColumns+`
		FROM review_item i LEFT JOIN provenance p ON p.id = i.provenance_id
		WHERE i.classifier = $1 AND i.state = 'queued' AND i.id <> ALL($2::bigint[])
		ORDER BY i.skipped_at NULLS FIRST, NOT ('disputed' = ANY(i.reasons)), i.id
		LIMIT 1`, classifierName, exclude)
	if err != nil {
		return classifier.ReviewItem{}, translate(err)
	}
	it, err := pgx.CollectExactlyOneRow(rows, scanReviewItem)
	return it, translate(err)
}

// ReviewItemGet returns one review item, or ErrNotFound.
func ReviewItemGet(ctx context.Context, exec DBTX, id int64) (classifier.ReviewItem, error) {
	rows, err := exec.Query(ctx, `SELECT `+reviewItemColumns+`
		FROM review_item i LEFT JOIN provenance p ON p.id = i.provenance_id WHERE i.id = $1`, id)
	if err != nil {
		return classifier.ReviewItem{}, translate(err)
	}
	it, err := pgx.CollectExactlyOneRow(rows, scanReviewItem)
	return it, translate(err)
}

// ReviewCounts returns how many items of a classifier are queued, and how
// many a reviewer has reviewed (verdicts given, not skips).
func ReviewCounts(ctx context.Context, exec DBTX, classifierName, reviewer string) (queued, reviewed int, err error) {
	err = exec.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM review_item WHERE classifier = $1 AND state = 'queued'),
		       (SELECT count(*) FROM review_item WHERE classifier = $1 AND state = 'reviewed' AND reviewer = $2)`,
		classifierName, reviewer).Scan(&queued, &reviewed)
	return queued, reviewed, translate(err)
}

// reviewCause names a verdict's change of an answer for the change log
// (issue 39, item 5): its trigger reads the transaction's setting.
const reviewCause = `SELECT set_config('domainclass.cause', 'review', true)`

// ReviewVerdict records reviewer's verdict on a queued item, in exec (a
// transaction the caller commits): yes or no sets the override of its
// (classifier, domain) to the verdict (set by the reviewer, with the note,
// confidence 5), keeping the override it replaces for an undo, and marks
// the item reviewed; nil (skip) sends the item to the back of the queue.
// It returns ErrNotFound for no such item and ErrConflict for an item that
// is no longer queued (another reviewer's verdict came first).
func ReviewVerdict(ctx context.Context, exec DBTX, id int64, verdict *bool, note, reviewer string) error {
	var (
		cls, domain string
		state       string
	)
	err := exec.QueryRow(ctx, `SELECT classifier, domain, state FROM review_item WHERE id = $1 FOR UPDATE`, id).
		Scan(&cls, &domain, &state)
	if err != nil {
		return translate(err)
	}
	if state != "queued" {
		return fmt.Errorf("%w: review item %d was reviewed already", ErrConflict, id)
	}
	if verdict == nil {
		_, err := exec.Exec(ctx, `
			UPDATE review_item SET skipped_at = now(), last_action = 'skip', last_actor = $2, last_action_at = clock_timestamp()
			WHERE id = $1`, id, reviewer)
		return translate(err)
	}
	var previous []byte // the override replaced, as a row of override; NULL for none
	var previousID *uuid.UUID
	err = exec.QueryRow(ctx, `SELECT to_jsonb(o), o.provenance_id FROM override o WHERE classifier = $1 AND domain = $2`,
		cls, domain).Scan(&previous, &previousID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return translate(err)
	}
	if _, err := exec.Exec(ctx, reviewCause); err != nil {
		return translate(err)
	}
	if note == "" {
		note = "Reviewed: " + map[bool]string{true: "yes", false: "no"}[*verdict] + "."
	}
	if _, _, err := OverrideSet(ctx, exec, []classifier.Override{{Classifier: cls, Domain: domain, Answer: *verdict,
		Confidence: 5, Note: note, SetBy: reviewer}}); err != nil {
		return err
	}
	_, err = exec.Exec(ctx, `
		UPDATE review_item i
		SET state = 'reviewed', verdict = $2, note = $3, reviewer = $4, reviewed_at = now(),
		    override_provenance_id = o.provenance_id, previous_override = $5, previous_provenance_id = $6,
		    last_action = 'verdict', last_actor = $4, last_action_at = clock_timestamp()
		FROM override o
		WHERE i.id = $1 AND o.classifier = i.classifier AND o.domain = i.domain`,
		id, *verdict, note, reviewer, previous, previousID)
	return translate(err)
}

// ReviewUndo takes back reviewer's last action not taken back yet, in exec
// (a transaction the caller commits): a verdict's override is replaced by
// the one it replaced (or deleted, when there was none) and the item is
// queued again; a skip puts the item back where it was. It returns the
// item and the action ("verdict" or "skip"); ErrNotFound when reviewer has
// nothing to undo, ErrConflict when the override was changed since the
// verdict (by an operator, or another verdict): the undo would lose that.
func ReviewUndo(ctx context.Context, exec DBTX, reviewer string) (id int64, action string, err error) {
	var (
		cls, domain string
		overrideID  *uuid.UUID
		previous    []byte
	)
	err = exec.QueryRow(ctx, `
		SELECT id, last_action, classifier, domain, override_provenance_id, previous_override FROM review_item
		WHERE last_actor = $1 AND last_action IS NOT NULL
		ORDER BY last_action_at DESC LIMIT 1 FOR UPDATE`, reviewer).
		Scan(&id, &action, &cls, &domain, &overrideID, &previous)
	if err != nil {
		return 0, "", translate(err)
	}
	if action == "skip" {
		_, err := exec.Exec(ctx, `UPDATE review_item SET skipped_at = NULL, last_action = NULL WHERE id = $1`, id)
		return id, action, translate(err)
	}
	var current uuid.UUID
	err = exec.QueryRow(ctx, `SELECT provenance_id FROM override WHERE classifier = $1 AND domain = $2 FOR UPDATE`,
		cls, domain).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (overrideID == nil || current != *overrideID)) {
		return id, action, fmt.Errorf("%w: the override of %s was changed since the verdict", ErrConflict, domain)
	} else if err != nil {
		return id, action, translate(err)
	}
	if _, err := exec.Exec(ctx, reviewCause); err != nil {
		return id, action, translate(err)
	}
	if previous == nil {
		_, err = exec.Exec(ctx, `DELETE FROM override WHERE classifier = $1 AND domain = $2`, cls, domain)
	} else {
		_, err = exec.Exec(ctx, `
			UPDATE override o SET answer = p.answer, confidence = p.confidence, note = p.note, set_by = p.set_by,
			       set_at = p.set_at, provenance_id = p.provenance_id
			FROM jsonb_populate_record(NULL::override, $3) p
			WHERE o.classifier = $1 AND o.domain = $2`, cls, domain, json.RawMessage(previous))
	}
	if err != nil {
		return id, action, translate(err)
	}
	_, err = exec.Exec(ctx, `
		UPDATE review_item
		SET state = 'queued', verdict = NULL, note = NULL, reviewer = NULL, reviewed_at = NULL,
		    override_provenance_id = NULL, previous_override = NULL, previous_provenance_id = NULL, last_action = NULL
		WHERE id = $1`, id)
	return id, action, translate(err)
}

// ReviewDispute records caller's dispute of the answer (classifier,
// domain) serves now (its override, else the model's last COMPLETED
// answer) and queues the answer, in one statement. A caller's second
// dispute of the same answer is the first: created is false and the
// dispute is the one recorded then. It returns ErrNotFound when the domain
// has no answer.
func ReviewDispute(ctx context.Context, exec DBTX, caller, classifierName, domain, note string) (d classifier.ReviewDispute, created bool, err error) {
	var (
		itemID    int64
		disputeID *int64
	)
	err = exec.QueryRow(ctx, `
		WITH served AS (
			SELECT classifier, domain, provenance_id, answer, confidence, 'Set by ' || set_by || ': ' || note AS reasoning,
			       set_at AS answered_at, 'override' AS source
			FROM override WHERE classifier = $2 AND domain = $3
			UNION ALL
			SELECT classifier, domain, provenance_id, answer, confidence, coalesce(reasoning, ''), classified_at, 'llm'
			FROM result WHERE classifier = $2 AND domain = $3 AND status = 'COMPLETED' AND provenance_id IS NOT NULL
			  AND NOT EXISTS (SELECT FROM override WHERE classifier = $2 AND domain = $3)
		), item AS (
			INSERT INTO review_item (classifier, domain, provenance_id, reasons, answer, confidence, reasoning, answered_at, source)
			SELECT classifier, domain, provenance_id, ARRAY['disputed'], answer, confidence, reasoning, answered_at, source FROM served
			ON CONFLICT (provenance_id) DO UPDATE
			SET reasons = CASE WHEN 'disputed' = ANY(review_item.reasons) THEN review_item.reasons
			                   ELSE review_item.reasons || 'disputed'::text END
			RETURNING id
		), dispute AS (
			INSERT INTO review_dispute (item_id, caller, note) SELECT id, $1, $4 FROM item
			ON CONFLICT (item_id, caller) DO NOTHING
			RETURNING id, created_at
		)
		SELECT i.id, d.id, coalesce(d.created_at, now()) FROM item i LEFT JOIN dispute d ON true`,
		caller, classifierName, domain, note).Scan(&itemID, &disputeID, &d.CreatedAt)
	if err != nil {
		return d, false, translate(err)
	}
	created = disputeID != nil
	if created {
		d.ID = *disputeID
	}
	if !created {
		err = exec.QueryRow(ctx, `SELECT id, note, created_at FROM review_dispute WHERE item_id = $1 AND caller = $2`,
			itemID, caller).Scan(&d.ID, &note, &d.CreatedAt)
		if err != nil {
			return d, false, translate(err)
		}
	}
	d.Note = note
	d.Item, err = ReviewItemGet(ctx, exec, itemID)
	return d, created, err
}

// ReviewStats returns the agreement of each model and prompt version of a
// classifier ("" for every classifier) with the reviewers: on the audit
// sample, on each queue and by confidence. Only the model's answers count
// (not an override disputed).
func ReviewStats(ctx context.Context, exec DBTX, classifierName string) ([]classifier.ReviewStat, error) {
	rows, err := exec.Query(ctx, `
		WITH r AS (
			SELECT i.classifier, coalesce(p.model, '') AS model, coalesce(p.prompt_version, '') AS prompt_version,
			       i.reasons, i.confidence, i.verdict = i.answer AS agreed
			FROM review_item i LEFT JOIN provenance p ON p.id = i.provenance_id
			WHERE i.state = 'reviewed' AND i.source = 'llm' AND ($1 = '' OR i.classifier = $1)
		)
		SELECT classifier, model, prompt_version, 'queue', reason, count(*), count(*) FILTER (WHERE agreed)
		FROM r, unnest(reasons) reason GROUP BY 1, 2, 3, 5
		UNION ALL
		SELECT classifier, model, prompt_version, 'confidence', confidence::text, count(*), count(*) FILTER (WHERE agreed)
		FROM r GROUP BY 1, 2, 3, 5
		ORDER BY 1, 2, 3`, classifierName)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []classifier.ReviewStat
	for rows.Next() {
		var (
			cls, model, prompt, kind, key string
			t                             classifier.ReviewTally
		)
		if err := rows.Scan(&cls, &model, &prompt, &kind, &key, &t.Reviewed, &t.Agreed); err != nil {
			return nil, translate(err)
		}
		if n := len(out); n == 0 || out[n-1].Classifier != cls || out[n-1].Model != model || out[n-1].PromptVersion != prompt {
			out = append(out, classifier.ReviewStat{Classifier: cls, Model: model, PromptVersion: prompt,
				Queues: map[string]classifier.ReviewTally{}, Confidence: map[int]classifier.ReviewTally{}})
		}
		s := &out[len(out)-1]
		switch kind {
		case "queue":
			s.Queues[key] = t
			if key == classifier.ReviewAudit {
				s.Audit = t
			}
		case "confidence":
			var c int
			_, _ = fmt.Sscan(key, &c)
			s.Confidence[c] = t
		}
	}
	return out, translate(rows.Err())
}

// ReviewReviewed returns the reviewed items of a classifier, the latest
// verdict on each domain, by domain: the labelled rows.
func ReviewReviewed(ctx context.Context, exec DBTX, classifierName string) ([]classifier.ReviewItem, error) {
	rows, err := exec.Query(ctx, `
		SELECT DISTINCT ON (i.domain) `+reviewItemColumns+`
		FROM review_item i LEFT JOIN provenance p ON p.id = i.provenance_id
		WHERE i.classifier = $1 AND i.state = 'reviewed'
		ORDER BY i.domain, i.reviewed_at DESC, i.id DESC`, classifierName)
	return collect(rows, err, scanReviewItem)
}

// ReviewQueued returns how many items each classifier has queued (only
// those with any).
func ReviewQueued(ctx context.Context, exec DBTX) (map[string]int, error) {
	rows, err := exec.Query(ctx, `SELECT classifier, count(*) FROM review_item WHERE state = 'queued' GROUP BY classifier`)
	if err != nil {
		return nil, translate(err)
	}
	out := map[string]int{}
	var (
		cls string
		n   int
	)
	_, err = pgx.ForEachRow(rows, []any{&cls, &n}, func() error { out[cls] = n; return nil })
	return out, translate(err)
}
