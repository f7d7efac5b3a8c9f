package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/spend"
)

// stage works a chunk of an economy list with a: overridden and cached
// domains are answered now; each fresh one is claimed (for the batch's
// whole window: no other job pays for it meanwhile), searched, and its
// request staged in the chunk's batch. When every row of the chunk is
// answered or staged, the batch goes to its own job (BatchWorker), in the
// transaction that completes this one.
func (w *ClassifyListWorker) stage(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs],
	l *classifier.List, c *classifier.Classifier, a answerer, from, to int, known db.Known) error {
	b, err := db.BatchOfChunk(ctx, w.DB, l.ID, job.Args.Chunk)
	if err != nil {
		return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error making the chunk's batch: %w", err), nil)
	}
	if b.Status == db.BatchStaging {
		nums, domains, err := db.ListUnstaged(ctx, w.DB, l.ID, from, to, b.ID)
		if err != nil {
			return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error loading rows: %w", err), nil)
		}
		pending := make([]pendingDomain, len(nums))
		for i := range nums {
			pending[i] = pendingDomain{Key: nums[i], Domain: domains[i]}
		}
		call := a.call
		call.Spender = w.Spend.ForBatch(l.Caller)
		a.classify = w.stageInto(b, l, call)
		a.hand = w.hand(l)
		o := a.answer(ctx, log, c, batchOwner(b.ID), pending, nil)
		o.Override, o.Cache = o.Override+known.Override, o.Cache+known.Cache
		o.summary(ctx, log, "list chunk staged", len(pending))
		_ = river.RecordOutput(ctx, listChunkOutput{ListID: l.ID.String(), Chunk: job.Args.Chunk, Domains: len(pending), Counts: o.Counts})
		if o.busy {
			// Mostly another list's provider batch, which answers in
			// minutes to hours: look again as a batch looks at its own.
			o.busyFor = max(o.busyFor, w.Settings.BatchPollInterval)
		}
		if err, failed := o.unfinished(ctx, log, w.Settings); err != nil {
			if failed {
				return w.retryOrGiveUp(ctx, log, job, l.ID, err, o.failures)
			}
			return err
		}
	}
	if err := w.handOver(ctx, log, job, l.ID, b); err != nil {
		return w.retryOrGiveUp(ctx, log, job, l.ID, fmt.Errorf("error handing the batch over: %w", err), nil)
	}
	return nil
}

// stageInto answers a domain of list l the way a batch will: by override or
// cache now, else claimed and searched, its request staged in batch b (a
// PENDING result, stored when the batch answers), counted with call's
// spender.
func (w *ClassifyListWorker) stageInto(b *db.Batch, l *classifier.List, call classifier.CallOptions) func(context.Context, *classifier.Classifier, pendingDomain, string) (classifier.Result, error) {
	return func(ctx context.Context, c *classifier.Classifier, d pendingDomain, owner string) (classifier.Result, error) {
		var spent spend.Reservation
		call := call
		call.Spender = spend.RecordStaged(call.Spender, &spent)
		r, pr, err := w.Pipeline.Stage(ctx, c, d.Domain, owner, w.Settings.BatchClaimTTL(), l.Want, call)
		if err != nil || pr == nil {
			return r, err
		}
		body, err := json.Marshal(pr.Request)
		if err == nil {
			err = db.BatchItemAdd(ctx, w.DB, b.ID, db.BatchItem{Row: d.Key, Domain: d.Domain, Body: body,
				PromptVersion: pr.PromptVersion, Search: pr.Search, Evidence: pr.Sources, SpendDay: spent.Day, SpendUSD: spent.USD})
		}
		if err != nil && !spent.Day.IsZero() {
			// Not staged: the next run stages it, and counts it, again.
			if gerr := db.CallerSpendAdd(context.WithoutCancel(ctx), w.DB, l.Caller, spent.Day, -1, -spent.USD); gerr != nil {
				w.Logger.WarnContext(ctx, "error giving a staged call back", "domain", d.Domain, "error", gerr)
			}
		}
		return r, err
	}
}

// handOver queues the batch's job (when it holds requests), ends the list
// if every row is final, and completes the chunk's job: one transaction.
func (w *ClassifyListWorker) handOver(ctx context.Context, log *slog.Logger, job *river.Job[ClassifyListArgs], id uuid.UUID, b *db.Batch) error {
	return w.finish(ctx, log, job, id, func(client *Client, tx pgx.Tx) error {
		if b.Status != db.BatchStaging {
			return nil // handed over by an earlier run
		}
		n, err := db.BatchMarkReady(ctx, tx, b.ID)
		if err != nil || n == 0 {
			return err
		}
		if _, err := client.InsertTx(ctx, tx, batchArgs{BatchID: b.ID.String(), ListID: id.String()}, nil); err != nil {
			return fmt.Errorf("error queueing the batch: %w", err)
		}
		log.InfoContext(ctx, "chunk staged for a batch", "requests", n)
		return nil
	})
}
