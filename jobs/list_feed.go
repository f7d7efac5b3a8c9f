package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/db"
)

// How a list's chunks are queued: the first by the upload, then each by the
// ones before it as they run, within a window of ListChunksInFlight chunks
// (see firstChunks).

// feedOrLog queues the list's next chunk if it is at most upTo (see
// feed), in a transaction of its own. A chunk feeds as it starts and once
// all its domains have started, while it holds its River slot, so that
// the worker processes race for the new job evenly. A failure is logged
// and costs the chunk nothing: finish feeds again, and the list sweep
// refills a list left with nothing queued.
func (w *ClassifyListWorker) feedOrLog(ctx context.Context, log *slog.Logger, id uuid.UUID, upTo, maxLive int) {
	err := func() error {
		client, tx, err := w.begin(ctx)
		if err != nil {
			return err
		}
		defer db.Rollback(ctx, tx)
		if _, err := feed(ctx, client, tx, id, upTo, maxLive); err != nil {
			return err
		}
		return db.Commit(ctx, tx)
	}()
	if err != nil && ctx.Err() == nil {
		log.WarnContext(ctx, "error queueing the next chunk; the chunk goes on, and queues it again as it ends", "error", err)
	}
}

// Inserter inserts River jobs in a transaction: *Client, or the API's
// insert-only client.
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// feedChunks queues list id's next chunks that have rows to answer, in
// tx, until n of its chunks are queued or running, and returns how many it
// queued: what a retry and the list sweep queue (the chunks then queue the
// ones after them as they run).
func feedChunks(ctx context.Context, ins Inserter, tx pgx.Tx, id uuid.UUID, n int) (int, error) {
	fed := 0
	for range n {
		ok, err := feed(ctx, ins, tx, id, math.MaxInt32, n)
		if err != nil || !ok {
			return fed, err
		}
		fed++
	}
	return fed, nil
}

// feed queues the list's next chunk with rows to answer, in tx, if the
// list's next chunk is at most upTo (and the list has one and is running)
// and fewer than maxLive of its chunks are queued, running or waiting to
// be retried. It reports whether it queued one.
//
// The second bound is the window: chunks that fail and wait for River's
// retry hold their place in it, so a list whose chunks keep failing (the
// provider or the database down) slows down instead of queueing chunk
// after chunk to fail in turn (issue 27: 530 chunk jobs unfinished, most of
// them retrying).
func feed(ctx context.Context, client Inserter, tx pgx.Tx, id uuid.UUID, upTo, maxLive int) (bool, error) {
	if _, err := db.ListLock(ctx, tx, id); err != nil {
		return false, ignoreNotFound(err)
	}
	live, err := db.ListLiveChunks(ctx, tx, ClassifyListArgs{}.Kind(), QueueList, id)
	if err != nil || live >= maxLive {
		return false, err
	}
	next, ok, err := db.ListNextChunk(ctx, tx, id, upTo)
	if err != nil || !ok {
		return false, err
	}
	if _, err := client.InsertTx(ctx, tx, ClassifyListArgs{ListID: id.String(), Chunk: next.Chunk, Pass: next.Pass}, nil); err != nil {
		return false, fmt.Errorf("error queueing chunk %d: %w", next.Chunk, err)
	}
	return true, nil
}

// feedSafely is feed inside a savepoint of tx: a failure to queue the next
// chunk is rolled back alone, logged, and does not undo the rest of tx
// (a chunk's end); the list sweep refills the list if nothing else does.
func feedSafely(ctx context.Context, log *slog.Logger, client *Client, tx pgx.Tx, id uuid.UUID, upTo, maxLive int) {
	sp, err := tx.Begin(ctx)
	if err == nil {
		if _, err = feed(ctx, client, sp, id, upTo, maxLive); err == nil {
			err = sp.Commit(ctx)
		} else {
			_ = sp.Rollback(ctx)
		}
	}
	if err != nil {
		log.WarnContext(ctx, "error queueing the next chunk; the list sweep will", "error", err)
	}
}
