package db

import (
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/domainclass/domainclass/classifier"
)

// queueModelAnswer queues the storage of a model's answer: its provenance,
// written once under a new id that r then carries (so that the job or list
// row stored in the same batch points at it), and the shared result of
// (domain, classifier).
func queueModelAnswer(batch *pgx.Batch, r *classifier.Result) {
	if r.ProvenanceID == uuid.Nil {
		r.ProvenanceID = uuid.Must(uuid.NewV7()) // time-ordered: new rows land at the index's end
	}
	evidence := r.Evidence
	if evidence == nil {
		evidence = []classifier.EvidenceItem{}
	}
	batch.Queue(`
		INSERT INTO provenance (id, model, prompt_version, search, evidence, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO NOTHING`,
		r.ProvenanceID, r.Model, r.PromptVersion, r.Search, evidence, r.ClassifiedAt)
	queueResultUpsert(batch, *r)
}

// provenanceColumns are the provenance of an answer row d joined to
// provenance p, in the order provenanceDest takes them.
const provenanceColumns = `p.id, coalesce(p.model, ''), coalesce(p.prompt_version, ''), coalesce(p.search, ''), coalesce(p.evidence, '[]'),
	coalesce(p.set_by, ''), coalesce(p.note, '')`

// provenanceDest returns the scan destinations of provenanceColumns in r.
func provenanceDest(r *classifier.Result, id *pgtype.UUID) []any {
	return []any{id, &r.Model, &r.PromptVersion, &r.Search, &r.Evidence, &r.SetBy, &r.Note}
}

// provenanceOrNil is r's provenance id, NULL for an answer that has none
// (from the known list of old, a failure before any call).
func provenanceOrNil(r classifier.Result) any {
	if r.ProvenanceID == uuid.Nil {
		return nil
	}
	return r.ProvenanceID
}

// evidenceURLs is the addresses of r's evidence separated by spaces (an
// address has none), NULL for an answer with no provenance.
func evidenceURLs(r classifier.Result) any {
	if r.ProvenanceID == uuid.Nil {
		return nil
	}
	urls := make([]string, len(r.Evidence))
	for i, e := range r.Evidence {
		urls[i] = e.URL
	}
	return strings.Join(urls, " ")
}
