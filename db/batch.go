package db

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// Batch statuses: a chunk of an economy list stages its requests
// (staging), marks them ready for the batch job, which submits them to the
// provider (submitted) and stores the answers (ended).
const (
	BatchStaging   = "staging"
	BatchReady     = "ready"
	BatchSubmitted = "submitted"
	BatchEnded     = "ended"
)

// Batch is one provider batch of an economy list's chunk.
type Batch struct {
	ID              uuid.UUID
	ListID          uuid.UUID
	Chunk           int
	Status          string
	ProviderBatchID string
	ProviderStatus  string
	Attempts        int
	Error           string
	SubmittedAt     *time.Time
}

// BatchItem is one staged request: the first list row of its domain and the
// chat completion body as it is sent.
type BatchItem struct {
	Row           int
	Domain        string
	Body          json.RawMessage
	PromptVersion string
	Search        string
	Evidence      []classifier.EvidenceItem
	// SpendDay and SpendUSD are what staging counted against the caller's
	// budget (zero day: nothing), for the batch to settle.
	SpendDay time.Time
	SpendUSD float64
	// Lost (as read by BatchItems): the batch no longer holds the domain's
	// claim, because a call took it over.
	Lost bool
}

const batchColumns = `id, list_id, chunk, status, coalesce(provider_batch_id, ''), coalesce(provider_status, ''),
	attempts, coalesce(error, ''), submitted_at`

func scanBatch(row pgx.Row) (*Batch, error) {
	b := new(Batch)
	err := row.Scan(&b.ID, &b.ListID, &b.Chunk, &b.Status, &b.ProviderBatchID, &b.ProviderStatus, &b.Attempts,
		&b.Error, &b.SubmittedAt)
	if err != nil {
		return nil, translate(err)
	}
	return b, nil
}

// BatchOfChunk returns the batch of a list's chunk, made on first use.
func BatchOfChunk(ctx context.Context, exec DBTX, listID uuid.UUID, chunk int) (*Batch, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	return scanBatch(exec.QueryRow(ctx, `
		WITH made AS (
			INSERT INTO llm_batch (id, list_id, chunk) VALUES ($1, $2, $3)
			ON CONFLICT (list_id, chunk) DO NOTHING
			RETURNING `+batchColumns+`
		)
		SELECT * FROM made UNION ALL
		SELECT `+batchColumns+` FROM llm_batch WHERE list_id = $2 AND chunk = $3 AND NOT EXISTS (SELECT FROM made)`,
		id, listID, chunk))
}

// BatchGet returns batch id, or ErrNotFound.
func BatchGet(ctx context.Context, exec DBTX, id uuid.UUID) (*Batch, error) {
	return scanBatch(exec.QueryRow(ctx, `SELECT `+batchColumns+` FROM llm_batch WHERE id = $1`, id))
}

// ListUnstaged returns the rows from..to of a list that still need an
// answer (as ListPending) and are not staged in batch.
func ListUnstaged(ctx context.Context, exec DBTX, listID uuid.UUID, from, to int, batch uuid.UUID) ([]int, []string, error) {
	rows, err := exec.Query(ctx, `
		SELECT r.row, r.domain FROM list_row r
		WHERE r.list_id = $1 AND r.row BETWEEN $2 AND $3 AND r.status = 'PENDING' AND r.first_row IS NULL
		  AND NOT EXISTS (SELECT FROM llm_batch_item i WHERE i.batch_id = $4 AND i.row = r.row)
		ORDER BY r.row`, listID, from, to, batch)
	if err != nil {
		return nil, nil, translate(err)
	}
	var (
		nums    []int
		domains []string
		n       int
		d       string
	)
	_, err = pgx.ForEachRow(rows, []any{&n, &d}, func() error {
		nums, domains = append(nums, n), append(domains, d)
		return nil
	})
	return nums, domains, translate(err)
}

// BatchItemAdd stages one request in batch (again: a no-op).
func BatchItemAdd(ctx context.Context, exec DBTX, batch uuid.UUID, it BatchItem) error {
	evidence := it.Evidence
	if evidence == nil {
		evidence = []classifier.EvidenceItem{}
	}
	var day *time.Time
	if !it.SpendDay.IsZero() {
		day = &it.SpendDay
	}
	_, err := exec.Exec(ctx, `
		INSERT INTO llm_batch_item (batch_id, row, domain, body, prompt_version, search, evidence, spend_day, spend_usd)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		batch, it.Row, it.Domain, []byte(it.Body), it.PromptVersion, it.Search, evidence, day, it.SpendUSD)
	return translate(err)
}

// BatchItems calls fn with each staged request of batch whose row is still
// PENDING, in row order, each saying whether owner (the batch) still holds
// its domain's claim.
func BatchItems(ctx context.Context, exec DBTX, batch uuid.UUID, owner string, fn func(BatchItem) error) error {
	rows, err := exec.Query(ctx, `
		SELECT i.row, i.domain, i.body, i.prompt_version, i.search, i.evidence, i.spend_day, i.spend_usd,
		       NOT EXISTS (SELECT FROM domain_claim c WHERE c.classifier = l.classifier AND c.domain = i.domain AND c.owner = $2)
		FROM llm_batch_item i JOIN llm_batch b ON b.id = i.batch_id
		JOIN list l ON l.id = b.list_id
		JOIN list_row r ON r.list_id = b.list_id AND r.row = i.row
		WHERE i.batch_id = $1 AND r.status = 'PENDING'
		ORDER BY i.row`, batch, owner)
	if err != nil {
		return translate(err)
	}
	var (
		it  BatchItem
		day *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&it.Row, &it.Domain, &it.Body, &it.PromptVersion, &it.Search, &it.Evidence,
		&day, &it.SpendUSD, &it.Lost}, func() error {
		it := it
		it.Evidence = slices.Clone(it.Evidence) // the next row's scan may reuse the array
		it.SpendDay = deref(day)
		return fn(it)
	})
	return translate(err)
}

// BatchSpendUnanswered sums, by day, what staging counted for batch's
// requests whose rows were never answered (a cancelled list's).
func BatchSpendUnanswered(ctx context.Context, exec DBTX, batch uuid.UUID) (map[time.Time]Spent, error) {
	rows, err := exec.Query(ctx, `
		SELECT i.spend_day, count(*)::int, sum(i.spend_usd)::float8
		FROM llm_batch_item i JOIN llm_batch b ON b.id = i.batch_id
		JOIN list_row r ON r.list_id = b.list_id AND r.row = i.row
		WHERE i.batch_id = $1 AND i.spend_day IS NOT NULL AND r.status IN ('PENDING', 'CANCELLED')
		GROUP BY i.spend_day`, batch)
	if err != nil {
		return nil, translate(err)
	}
	out := map[time.Time]Spent{}
	var (
		day time.Time
		sp  Spent
	)
	_, err = pgx.ForEachRow(rows, []any{&day, &sp.Calls, &sp.USD}, func() error {
		out[day] = sp
		return nil
	})
	return out, translate(err)
}

// Spent is model calls and their price counted on one day.
type Spent struct {
	Calls int
	USD   float64
}

// BatchMarkReady hands a staged batch to its job and returns how many
// requests it holds; a batch with none is ended instead.
func BatchMarkReady(ctx context.Context, exec DBTX, id uuid.UUID) (int, error) {
	var n int
	err := exec.QueryRow(ctx, `
		UPDATE llm_batch b SET status = CASE WHEN i.n > 0 THEN 'ready' ELSE 'ended' END,
		       ended_at = CASE WHEN i.n > 0 THEN NULL ELSE now() END
		FROM (SELECT count(*)::int AS n FROM llm_batch_item WHERE batch_id = $1) i
		WHERE b.id = $1 AND b.status = 'staging'
		RETURNING i.n`, id).Scan(&n)
	return n, translate(err)
}

// ClaimsRelease gives up every claim owner holds (a batch that ended
// without answering all its domains).
func ClaimsRelease(ctx context.Context, exec DBTX, owner string) error {
	_, err := exec.Exec(ctx, `DELETE FROM domain_claim WHERE owner = $1`, owner)
	return translate(err)
}

// BatchSubmit records the provider's batch for id.
func BatchSubmit(ctx context.Context, exec DBTX, id uuid.UUID, providerBatchID, providerStatus string) error {
	_, err := exec.Exec(ctx, `
		UPDATE llm_batch SET status = 'submitted', provider_batch_id = $2, provider_status = $3,
		       attempts = attempts + 1, submitted_at = now(), error = NULL
		WHERE id = $1`, id, providerBatchID, providerStatus)
	return translate(err)
}

// BatchProviderStatus records the provider batch's last status.
func BatchProviderStatus(ctx context.Context, exec DBTX, id uuid.UUID, providerStatus string) error {
	_, err := exec.Exec(ctx, `UPDATE llm_batch SET provider_status = $2 WHERE id = $1`, id, providerStatus)
	return translate(err)
}

// BatchResubmit puts a batch the provider failed as a whole back to ready,
// with why.
func BatchResubmit(ctx context.Context, exec DBTX, id uuid.UUID, reason string) error {
	_, err := exec.Exec(ctx, `
		UPDATE llm_batch SET status = 'ready', provider_batch_id = NULL, provider_status = NULL, error = $2
		WHERE id = $1`, id, reason)
	return translate(err)
}

// BatchEnd marks batch id ended, with the provider's reason when it failed.
// It reports false when the batch had ended already.
func BatchEnd(ctx context.Context, exec DBTX, id uuid.UUID, reason string) (bool, error) {
	tag, err := exec.Exec(ctx, `UPDATE llm_batch SET status = 'ended', error = NULLIF($2, ''), ended_at = now() WHERE id = $1 AND status <> 'ended'`,
		id, reason)
	if err != nil {
		return false, translate(err)
	}
	return tag.RowsAffected() == 1, nil
}
