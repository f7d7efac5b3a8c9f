package jobs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// batchRun is one run of a batch's job: the batch, its list and
// classifier, its staged requests (read at most once per run), and what the
// run did (recorded on the job).
type batchRun struct {
	w     *BatchWorker
	log   *slog.Logger
	b     *db.Batch
	l     *classifier.List
	c     *classifier.Classifier
	owner string // the batch's claim on its domains
	// items are the batch's requests not answered yet, in row order,
	// without their prompts; nil until read. byDomain finds them by the
	// request's custom_id.
	items    []*batchItem
	byDomain map[string]*batchItem
	out      batchOutput
	// spend is what the run settles of its caller's staged calls, by the
	// day each was counted on (settleSpend).
	spend map[time.Time]db.Spent
}

// batchItem is a staged request as its answer needs it: its list row and
// what Verdict reads (model, prompt version, evidence), not its prompt.
type batchItem struct {
	db.BatchItem
	prepared classifier.Prepared
	answered bool
}

func (w *BatchWorker) newRun(ctx context.Context, b *db.Batch) (*batchRun, error) {
	l, err := db.ListGet(ctx, w.DB, b.ListID)
	if err != nil {
		return nil, err
	}
	return &batchRun{w: w, b: b, l: l, owner: batchOwner(b.ID), out: batchOutput{ListID: l.ID.String()}, spend: map[time.Time]db.Spent{},
		log: w.Logger.With("batch", b.ID.String(), "list_id", b.ListID.String(), "provider_batch_id", b.ProviderBatchID)}, nil
}

func batchOwner(id uuid.UUID) string { return "batch:" + id.String() }

// readItems reads the batch's requests not answered yet, once: each is
// passed whole (prompt included) to each, when set, and kept without its
// prompt (2 to 6 kB each, read again only for the fallbacks).
func (r *batchRun) readItems(ctx context.Context, each func(db.BatchItem, classifier.CompletionRequest) error) error {
	r.items, r.byDomain = []*batchItem{}, map[string]*batchItem{}
	return db.BatchItems(ctx, r.w.DB, r.b.ID, r.owner, func(it db.BatchItem) error {
		var req classifier.CompletionRequest
		if each == nil { // the model alone: the prompt is not decoded
			var head struct{ Model string }
			if err := json.Unmarshal(it.Body, &head); err != nil {
				return fmt.Errorf("staged request of %s: %w", it.Domain, err)
			}
			req.Model = head.Model
		} else if err := json.Unmarshal(it.Body, &req); err != nil {
			return fmt.Errorf("staged request of %s: %w", it.Domain, err)
		} else if err := each(it, req); err != nil {
			return err
		}
		it.Body = nil
		bi := &batchItem{BatchItem: it, prepared: classifier.Prepared{Domain: it.Domain,
			Request: classifier.CompletionRequest{Model: req.Model}, PromptVersion: it.PromptVersion,
			Search: it.Search, Sources: it.Evidence}}
		r.items, r.byDomain[it.Domain] = append(r.items, bi), bi
		return nil
	})
}

// maxBatchFileBytes is the provider's limit on a batch input file (OpenAI:
// 200 MB).
const maxBatchFileBytes = 200 << 20

// errBatchTooLarge: the batch's file is over maxBatchFileBytes; its
// requests are asked as calls instead.
var errBatchTooLarge = errors.New("the batch file is over the provider's limit")

// submit sends a ready batch to the provider, then waits for it (a
// snooze). A file over the provider's limit is not sent: its requests are
// asked as calls. A file the provider refuses fails the batch's rows at
// once, with its reason: no retry would change it.
func (r *batchRun) submit(ctx context.Context) error {
	err := r.send(ctx)
	var rejected *llm.RejectedError
	switch {
	case errors.Is(err, errBatchTooLarge):
		r.log.ErrorContext(ctx, "batch not sent; its requests are asked as calls (lower BATCH_MAX_REQUESTS)", "error", err)
		return r.storeAndEnd(ctx, llm.BatchStatus{}, err.Error())
	case errors.As(err, &rejected):
		return r.failAll(ctx, "the provider refused the batch: "+err.Error(), err.Error())
	}
	return err
}

// send uploads the batch's requests and starts the provider's batch. The
// provider's batch carries our id and attempt, so that a run that died
// after creating it finds it instead of paying for a second.
func (r *batchRun) send(ctx context.Context) error {
	w := r.w
	key := r.b.ID.String() + "/" + strconv.Itoa(r.b.Attempts+1)
	st, found, err := w.Batcher.BatchFind(ctx, key)
	if err != nil {
		return w.providerErr(err)
	}
	if !found {
		var (
			input bytes.Buffer
			lines int
		)
		err := r.readItems(ctx, func(it db.BatchItem, req classifier.CompletionRequest) error {
			if it.Lost {
				return nil // a call took it over: answered at the end, not sent
			}
			lines++
			line, err := w.Batcher.BatchLine(it.Domain, req)
			if err != nil {
				return err
			}
			input.Write(line)
			input.WriteByte('\n')
			return nil
		})
		if err != nil {
			return err
		}
		if len(r.items) == 0 { // every row was answered meanwhile (a cancel, a redelivery)
			return r.end(ctx, "")
		}
		if lines == 0 { // calls took every domain over: their answers are the batch's
			return r.storeAndEnd(ctx, llm.BatchStatus{}, "")
		}
		if input.Len() > cmp.Or(w.MaxFileBytes, maxBatchFileBytes) {
			return fmt.Errorf("%w: %d requests make %d MB", errBatchTooLarge, len(r.items), input.Len()>>20)
		}
		if st, err = w.Batcher.BatchSubmit(ctx, &input, key); err != nil {
			return w.providerErr(err)
		}
		r.log.InfoContext(ctx, "batch submitted", "requests", len(r.items), "provider_batch_id", st.ID)
	}
	if err := db.BatchSubmit(ctx, w.DB, r.b.ID, st.ID, st.Status); err != nil {
		return err
	}
	return river.JobSnooze(w.Settings.BatchPollInterval)
}

// poll looks at a submitted batch: while the provider runs it, the job
// snoozes (no worker slot and no model slot held in between); once it has
// ended its answers are stored, and what it did not answer is asked as
// calls; a batch failed whole is submitted again, or its rows fail.
func (r *batchRun) poll(ctx context.Context) error {
	st, err := r.w.Batcher.BatchGet(ctx, r.b.ProviderBatchID)
	if err != nil {
		return r.w.providerErr(err)
	}
	if err := db.BatchProviderStatus(ctx, r.w.DB, r.b.ID, st.Status); err != nil {
		return err
	}
	r.out.ProviderBatchID, r.out.ProviderStatus = st.ID, st.Status
	switch {
	case st.Running():
		_ = river.RecordOutput(ctx, r.out)
		return river.JobSnooze(r.w.Settings.BatchPollInterval)
	case st.Status == "failed":
		return r.failed(ctx, st)
	}
	// completed, expired or cancelled: store what it answered; ask again,
	// one call each, what it did not.
	return r.storeAndEnd(ctx, st, "")
}

// failed submits a batch the provider failed as a whole again, up to
// BatchMaxAttempts times; then its rows fail with the provider's reason.
func (r *batchRun) failed(ctx context.Context, st llm.BatchStatus) error {
	if r.b.Attempts < r.w.Settings.BatchMaxAttempts {
		r.log.WarnContext(ctx, "provider failed the batch; submitting it again", "reason", st.Error, "attempt", r.b.Attempts)
		if err := db.BatchResubmit(ctx, r.w.DB, r.b.ID, st.Error); err != nil {
			return err
		}
		return river.JobSnooze(r.w.Settings.BatchPollInterval)
	}
	err := r.failAll(ctx, fmt.Sprintf("the provider failed the batch %d times: %s", r.b.Attempts, st.Error), st.Error)
	_ = river.RecordOutput(ctx, r.out)
	return err
}

// failAll fails every row of the batch not final yet with rowReason, and
// ends the batch with reason.
func (r *batchRun) failAll(ctx context.Context, rowReason, reason string) error {
	if r.items == nil {
		if err := r.readItems(ctx, nil); err != nil {
			return err
		}
	}
	for _, it := range r.items {
		res := classifier.Result{Domain: it.Domain, Classifier: r.l.Classifier, Status: classifier.StatusFailed,
			Source: classifier.SourceLLM, Error: rowReason, ClassifiedAt: time.Now().UTC()}
		if err := r.storeAnswer(ctx, it, res, classifier.TierEconomy); err != nil {
			return err
		}
		r.out.Failed++
	}
	return r.end(ctx, reason)
}

// abandon ends a batch whose list has ended: the provider's batch is
// cancelled (what it has answered is not stored: the list's rows are
// CANCELLED) and the claims are given up.
func (r *batchRun) abandon(ctx context.Context, reason string) error {
	made := 0 // requests the provider answered before the cancel
	if r.b.Status == db.BatchSubmitted {
		st, err := r.w.Batcher.BatchCancel(ctx, r.b.ProviderBatchID)
		var rejected *llm.RejectedError
		switch {
		case errors.As(err, &rejected):
			r.log.InfoContext(ctx, "provider batch had ended already", "reason", err)
		case err != nil:
			return r.w.providerErr(err)
		default:
			made = st.Completed
			r.log.InfoContext(ctx, "provider batch cancelled", "provider_status", st.Status, "completed", st.Completed)
		}
	}
	if err := db.ClaimsRelease(ctx, r.w.DB, r.owner); err != nil {
		return err
	}
	// The staged calls of the rows never answered go back to the caller,
	// but for those the provider answered before the cancel (it charges
	// them); in the transaction that ends the batch, so they go back once.
	tx, err := db.Begin(ctx, r.w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	unanswered, err := db.BatchSpendUnanswered(ctx, tx, r.b.ID)
	if err != nil {
		return err
	}
	if ended, err := db.BatchEnd(ctx, tx, r.b.ID, reason); err != nil || !ended {
		return err
	}
	for day, sp := range unanswered {
		kept := min(made, sp.Calls)
		made -= kept
		back := sp.Calls - kept
		if back == 0 {
			continue
		}
		if err := db.CallerSpendAdd(ctx, tx, r.l.Caller, day, -back, -sp.USD*float64(back)/float64(sp.Calls)); err != nil {
			return err
		}
	}
	return db.Commit(ctx, tx)
}

// end marks the batch ended, gives up its claims that remain, and ends the
// list when this was its last work.
func (r *batchRun) end(ctx context.Context, reason string) error {
	w := r.w
	if err := db.ClaimsRelease(ctx, w.DB, r.owner); err != nil {
		return err
	}
	client, tx, err := begin(ctx, w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	if _, err := db.BatchEnd(ctx, tx, r.b.ID, reason); err != nil {
		return err
	}
	ended, err := endList(ctx, tx, client, w.Settings, r.l.ID, asCompleted())
	if err != nil {
		return err
	}
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	if ended {
		w.Lists.ListEnded(classifier.StatusCompleted)
		r.log.InfoContext(ctx, "list completed")
	}
	return nil
}
