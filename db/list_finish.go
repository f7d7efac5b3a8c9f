package db

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// RowAnswer is the answer of one row of a list (the first row of its
// domain), as ListRowsFinish stores it. Owner, when set, is whose claim on
// the domain the store releases (else the owner ListRowsFinish is given).
type RowAnswer struct {
	Row    int
	Result classifier.Result
	Owner  string
}

// RowsStored is what a set of answers made final: rows, and of them how
// many COMPLETED and how many FAILED.
type RowsStored struct {
	Rows, Completed, Failed int
}

// RowSet is a set of answers of one list, for ListRowsStore.
type RowSet struct {
	ListID  uuid.UUID
	Answers []RowAnswer
}

// ListRowsStore stores sets of answers of several lists in one
// transaction (one round trip), each set as ListRowsFinish stores it, and
// returns what each made final. Within a set the model's answers are one
// statement, under the provenance hold, and the others (overrides, cached
// answers, failures) another, checked row by row: a set need not be all of
// one kind.
func ListRowsStore(ctx context.Context, exec DBTX, sets []RowSet) ([]RowsStored, error) {
	type part struct {
		set  int
		done RowsStored
	}
	var parts []*part
	batch := &pgx.Batch{}
	for i, s := range sets {
		var model, other []RowAnswer
		for _, a := range s.Answers {
			if a.Result.Source == classifier.SourceLLM {
				model = append(model, a)
			} else {
				other = append(other, a)
			}
		}
		for _, as := range [][]RowAnswer{model, other} {
			if len(as) == 0 {
				continue
			}
			p := &part{set: i}
			parts = append(parts, p)
			if err := queueRowsFinish(batch, s.ListID, as, "", &p.done); err != nil {
				return nil, err
			}
		}
	}
	out := make([]RowsStored, len(sets))
	if batch.Len() == 0 {
		return out, nil
	}
	if err := translate(exec.SendBatch(ctx, batch).Close()); err != nil {
		return nil, err
	}
	for _, p := range parts {
		o := &out[p.set]
		o.Rows, o.Completed, o.Failed = o.Rows+p.done.Rows, o.Completed+p.done.Completed, o.Failed+p.done.Failed
	}
	return out, nil
}

// ListRowsFinish stores many answers of list listID at once, as
// ListRowFinish stores one: each model answer's provenance and the shared
// result of its domain, each answer on its row and the row's later
// duplicates, owner's claims on the domains released, and the list's
// progress counted once; one statement. A row already final keeps its
// first answer. It returns how many rows became final. The answers'
// domains must be distinct (one answer a domain: a batch's requests).
//
// Each write finds its rows by an index condition: the range of the
// answers' rows (and = ANY of them), not by a join alone. A list just
// uploaded has no statistics, and the planner would otherwise read the
// whole list to join it (every row of a million-row list for each set of
// 500, measured); nor by = ANY alone, which with such statistics it
// applies as a filter after reading every row of the list from the index.
func ListRowsFinish(ctx context.Context, exec DBTX, listID uuid.UUID, answers []RowAnswer, owner string) (int, error) {
	if len(answers) == 0 {
		return 0, nil
	}
	var done RowsStored
	batch := &pgx.Batch{}
	if err := queueRowsFinish(batch, listID, answers, owner, &done); err != nil {
		return 0, err
	}
	return done.Rows, translate(exec.SendBatch(ctx, batch).Close())
}

// queueRowsFinish queues ListRowsFinish's statement (with the provenance
// hold around it when every answer is the model's), its result read into
// done.
func queueRowsFinish(batch *pgx.Batch, listID uuid.UUID, answers []RowAnswer, owner string, done *RowsStored) error {
	n := len(answers)
	var (
		rows                        = make([]int32, n)
		domains, classifiers        = make([]string, n), make([]string, n)
		statuses, sources           = make([]string, n), make([]string, n)
		answerVals                  = make([]*bool, n)
		confidences                 = make([]*int16, n)
		reasonings, errs            = make([]string, n), make([]string, n)
		classifiedAt                = make([]any, n)
		provenanceIDs               = make([]*uuid.UUID, n)
		models, prompts, searches   = make([]string, n), make([]string, n), make([]string, n)
		evidence                    = make([]string, n)
		urls                        = make([]*string, n)
		costs                       = make([]float64, n)
		latency, promptTok, complTk = make([]*int64, n), make([]*int64, n), make([]*int64, n)
		batchIDs                    = make([]string, n)
		fromModel                   = make([]bool, n)
		owners                      = make([]string, n)
	)
	for i, a := range answers {
		r := a.Result
		if r.Source == classifier.SourceLLM && r.ProvenanceID == uuid.Nil {
			r.ProvenanceID = uuid.Must(uuid.NewV7())
		}
		rows[i], domains[i], classifiers[i] = int32(a.Row), r.Domain, r.Classifier
		statuses[i], sources[i] = string(r.Status), string(r.Source)
		answerVals[i], confidences[i] = answerOrNil(r), confidenceOrNil(r)
		reasonings[i], errs[i], classifiedAt[i] = r.Reasoning, r.Error, r.ClassifiedAt
		if r.ProvenanceID != uuid.Nil {
			id := r.ProvenanceID
			provenanceIDs[i] = &id
		}
		models[i], prompts[i], searches[i], batchIDs[i] = r.Model, r.PromptVersion, r.Search, r.BatchID
		ev := r.Evidence
		if ev == nil {
			ev = []classifier.EvidenceItem{}
		}
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		evidence[i] = string(b)
		if u, ok := evidenceURLs(r).(string); ok {
			urls[i] = &u
		}
		costs[i] = r.Usage.Cost()
		if u := r.Usage; u != nil {
			l, p, c := u.Latency.Milliseconds(), int64(u.PromptTokens), int64(u.CompletionTokens)
			latency[i], promptTok[i], complTk[i] = &l, &p, &c
		}
		fromModel[i] = r.Source == classifier.SourceLLM
		owners[i] = cmp.Or(a.Owner, owner)
	}
	// Each model answer's provenance is written by the statement: the purge
	// cannot have it, and list_row's row-by-row check is skipped for it
	// (migration 00020). An answer from an override or the cache read
	// earlier is checked row by row, as ListRowFinish's is.
	held := !slices.Contains(fromModel, false)
	if held {
		queueProvenanceHold(batch)
	}
	batch.Queue(rowsFinishSQL,
		listID, rows, domains, classifiers, statuses, sources, answerVals, confidences, reasonings, errs, classifiedAt,
		provenanceIDs, models, prompts, searches, evidence, urls, costs, latency, promptTok, complTk, batchIDs, fromModel,
		owners, slices.Min(rows), slices.Max(rows)).QueryRow(func(row pgx.Row) error { return row.Scan(&done.Rows, &done.Completed, &done.Failed) })
	if held {
		queueProvenanceRelease(batch)
	}
	return nil
}

// rowsFinishSQL is queueRowsFinish's statement: $1 is the list, $2 to $24
// the answers' columns (unnested as a), $25 and $26 the least and greatest
// row. It writes the model's provenance and results, releases the domains'
// claims, answers the PENDING rows (first rows, then their duplicates),
// adds the counts to the list and returns them.
const rowsFinishSQL = `
	WITH a AS (
		SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::smallint[],
		                     $9::text[], $10::text[], $11::timestamptz[], $12::uuid[], $13::text[], $14::text[], $15::text[],
		                     $16::jsonb[], $17::text[], $18::float8[], $19::bigint[], $20::bigint[], $21::bigint[],
		                     $22::text[], $23::bool[], $24::text[])
		    AS u (row, domain, classifier, status, source, answer, confidence, reasoning, error, classified_at,
		          provenance_id, model, prompt_version, search, evidence, evidence_urls, cost, latency_ms,
		          prompt_tokens, completion_tokens, batch_id, from_model, owner)
	), provenance_written AS (
		INSERT INTO provenance (id, model, prompt_version, search, evidence, created_at)
		SELECT provenance_id, model, prompt_version, search, evidence, classified_at FROM a WHERE from_model
		ON CONFLICT (id) DO NOTHING
	), result_written AS (
		INSERT INTO result (domain, classifier, status, answer, confidence, reasoning, error,
		                    provenance_id, classified_at, latency_ms, prompt_tokens, completion_tokens, batch_id)
		SELECT domain, classifier, status, answer, confidence, NULLIF(reasoning, ''), NULLIF(error, ''),
		       provenance_id, classified_at, latency_ms, prompt_tokens, completion_tokens, NULLIF(batch_id, '')
		FROM a WHERE from_model
		ON CONFLICT (domain, classifier) DO UPDATE
		SET status = excluded.status, answer = excluded.answer, confidence = excluded.confidence,
		    reasoning = excluded.reasoning, error = excluded.error, provenance_id = excluded.provenance_id,
		    classified_at = excluded.classified_at, latency_ms = excluded.latency_ms,
		    prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
		    batch_id = excluded.batch_id
		WHERE excluded.status = 'COMPLETED' OR result.status = 'FAILED'
	), released AS (
		DELETE FROM domain_claim c USING a
		WHERE c.domain = ANY($3) AND c.classifier = a.classifier AND c.domain = a.domain AND c.owner = a.owner
	), firsts AS (
		UPDATE list_row t SET status = a.status, answer = a.answer, confidence = a.confidence, reasoning = NULLIF(a.reasoning, ''),
		       source = NULLIF(a.source, ''), error = NULLIF(a.error, ''), classified_at = a.classified_at,
		       provenance_id = a.provenance_id, model = NULLIF(a.model, ''), prompt_version = NULLIF(a.prompt_version, ''),
		       evidence_urls = a.evidence_urls
		FROM a WHERE t.list_id = $1 AND t.row BETWEEN $25 AND $26 AND t.row = ANY($2) AND t.row = a.row AND t.status = 'PENDING'
		RETURNING a.status, a.source, a.cost
	), dups AS (
		UPDATE list_row t SET status = a.status, answer = a.answer, confidence = a.confidence, reasoning = NULLIF(a.reasoning, ''),
		       source = NULLIF(a.source, ''), error = NULLIF(a.error, ''), classified_at = a.classified_at,
		       provenance_id = a.provenance_id, model = NULLIF(a.model, ''), prompt_version = NULLIF(a.prompt_version, ''),
		       evidence_urls = a.evidence_urls
		FROM a WHERE t.list_id = $1 AND t.first_row BETWEEN $25 AND $26 AND t.first_row = ANY($2) AND t.first_row = a.row AND t.status = 'PENDING'
		RETURNING a.status, a.source, 0::float8 AS cost
	), final AS (
		SELECT * FROM firsts UNION ALL SELECT * FROM dups
	), n AS (
		SELECT count(*)::int AS n_rows,
		       count(*) FILTER (WHERE status = 'COMPLETED')::int AS n_completed,
		       count(*) FILTER (WHERE status <> 'COMPLETED')::int AS n_failed,
		       count(*) FILTER (WHERE status = 'COMPLETED' AND source = 'override')::int AS n_override,
		       count(*) FILTER (WHERE status = 'COMPLETED' AND source = 'known')::int AS n_known,
		       count(*) FILTER (WHERE status = 'COMPLETED' AND source = 'cache')::int AS n_cache,
		       count(*) FILTER (WHERE status = 'COMPLETED' AND source = 'llm')::int AS n_llm,
		       coalesce(sum(cost), 0) AS n_cost
		FROM final
	), counted AS (
		UPDATE list SET done = done + n_rows, completed = completed + n_completed, failed = failed + n_failed,
		       override = override + n_override, known = known + n_known, cache = cache + n_cache, llm = llm + n_llm,
		       cost_usd = cost_usd + n_cost
		FROM n WHERE list.id = $1 AND n_rows > 0
	)
	SELECT n_rows, n_completed, n_failed FROM n`
