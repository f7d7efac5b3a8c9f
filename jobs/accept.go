package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/admission"
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// The service seam: the steps that accept, cancel, retry and end work
// (this file and end.go). Each takes the caller's transaction and River's
// client as the narrow interface it needs, and does every write and River
// call of its step; the caller begins and commits. The API's handlers
// call them between parsing a request and mapping its errors, the workers
// call the End steps, and the tests call the same steps instead of
// writing rows by hand.

// ManyInserter inserts several River jobs in one statement: what accepting
// a list needs (the API's River client, or *Client).
type ManyInserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// AcceptJob writes job p in tx: River's job first, then ours with its id
// (one statement that also checks the caller's queued domains), then key
// when not nil (the first answer an Idempotency-Key replays). p.RiverJobID
// is set here. It returns db.ErrUnavailable (River's errors are translated
// as db's are), a *db.QueueFullError when the caller has too many domains
// queued, or another error; tx is then to be rolled back.
func AcceptJob(ctx context.Context, tx pgx.Tx, ins Inserter, p db.JobInsertParams, key *db.IdempotencyKey) error {
	res, err := ins.InsertTx(ctx, tx, ClassifyArgs{JobID: p.ID.String()}, nil)
	if err != nil {
		return fmt.Errorf("error enqueueing classify job: %w", db.Translate(err))
	}
	p.RiverJobID = res.Job.ID
	if err := db.JobInsert(ctx, tx, p); err != nil {
		return err
	}
	if key != nil {
		return db.IdempotencyKeyInsert(ctx, tx, *key)
	}
	return nil
}

// ListAccept is a list for AcceptList to write.
type ListAccept struct {
	// List is the list: its id, caller, classifier, callback URL, tier,
	// Want and the counts of its rows. AcceptList sets its chunking and
	// its retention from the settings.
	List *classifier.List
	// Rows are its rows, normalized, in order; COPY writes them.
	Rows db.ListRowSource
	// Answer, when not nil, has the rows an override or a fresh cached
	// answer answers written answered at once (db.ListRowsAccept), and
	// Rows is not used.
	Answer *AnswerRules
	// Admit, when not nil, is the caller's admission (its limits, its
	// budget, the estimator), asked again in tx once the rows are in (so
	// that they can be counted and priced), before the list is written:
	// admission.List at admission.Written, for List. Its error is returned
	// as it is.
	Admit *admission.Request
	// Key, when not nil, is the Idempotency-Key to keep with its answer.
	Key *db.IdempotencyKey
}

// AnswerRules are how an upload answers its rows as it writes them: the
// rows again from the first as often as asked (Rows), the cache's rules
// (the pipeline's Freshness, judged at Now), and the directory of the
// look-up's scratch file.
type AnswerRules struct {
	Rows      func() (db.ListRowSource, error)
	Freshness classifier.Freshness
	Now       time.Time
	Dir       string
}

// AcceptList writes list a in tx: its rows (COPY; answered at once where
// a.Answer says), the list with its chunking (ListChunkRows rows a chunk,
// or BatchMaxRequests for an economy list: a chunk of it is one provider
// batch) and its counters, its first chunk's River job and the key. It
// returns what the upload answered (nothing is counted in metrics before
// tx commits), and admission's errors, db.ErrUnavailable, or another error; tx
// is then to be rolled back, and nothing of the list is left.
func AcceptList(ctx context.Context, tx pgx.Tx, ins ManyInserter, s Settings, a ListAccept) (db.Accepted, error) {
	l := a.List
	l.ChunkRows, l.Retention = s.ListChunkRows, s.ListRetention
	if l.Tier == classifier.TierEconomy {
		l.ChunkRows = s.BatchMaxRequests
	}
	l.Chunks = (l.Rows + l.ChunkRows - 1) / l.ChunkRows
	var known db.Accepted
	if r := a.Answer; r != nil {
		var err error
		if known, err = db.ListRowsAccept(ctx, tx, l, r.Rows, r.Freshness, r.Now, r.Dir); err != nil {
			return known, err
		}
		l.Completed, l.Override, l.Cache = known.Rows, known.OverrideRows, known.CacheRows
	} else if _, err := db.ListRowsCopy(ctx, tx, l.ID, a.Rows); err != nil {
		return known, err
	}
	if a.Admit != nil {
		r := *a.Admit
		r.Stage, r.List = admission.Written, l
		if _, err := admission.List(ctx, tx, r); err != nil {
			return known, err
		}
	}
	first := firstChunks(l.ID)
	if err := db.ListInsert(ctx, tx, l, len(first)); err != nil {
		return known, err
	}
	if _, err := ins.InsertManyTx(ctx, tx, first); err != nil {
		return known, fmt.Errorf("error enqueueing the list's chunks: %w", db.Translate(err))
	}
	if a.Key != nil {
		return known, db.IdempotencyKeyInsert(ctx, tx, *a.Key)
	}
	return known, nil
}
