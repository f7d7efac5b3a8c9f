package jobs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// Batcher is the provider's Batch API (*llm.Client).
type Batcher interface {
	BatchLine(customID string, req classifier.CompletionRequest) ([]byte, error)
	BatchSubmit(ctx context.Context, input io.Reader, key string) (llm.BatchStatus, error)
	BatchFind(ctx context.Context, key string) (llm.BatchStatus, bool, error)
	BatchGet(ctx context.Context, id string) (llm.BatchStatus, error)
	BatchCancel(ctx context.Context, id string) (llm.BatchStatus, error)
	BatchResults(ctx context.Context, b llm.BatchStatus, fn func(llm.BatchResult) error) error
}

// Pricer prices a model call's usage, at the batch price when batch; 0
// when the model is not in the price table.
type Pricer func(model string, u *classifier.Usage, batch bool) float64

// BatchArgs follows one provider batch of an economy list's chunk. Like
// the others it is a claim check: the batch and its requests live in
// Postgres (llm_batch, llm_batch_item).
type BatchArgs struct {
	BatchID string `json:"batch_id"`
	ListID  string `json:"list_id"`
}

// Kind is the River job kind.
func (BatchArgs) Kind() string { return "llm_batch" }

// InsertOpts puts batch jobs on the list queue, one per batch.
func (BatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueList, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// BatchOutput is recorded on the batch's River job (River UI shows it).
type BatchOutput struct {
	ListID          string `json:"list_id"`
	ProviderBatchID string `json:"provider_batch_id,omitempty"`
	ProviderStatus  string `json:"provider_status,omitempty"`
	Answered        int    `json:"answered,omitempty"`
	Fallbacks       int    `json:"fallbacks,omitempty"`
	Failed          int    `json:"failed,omitempty"`
}

// BatchWorker works BatchArgs. Each run is short: it submits the batch,
// or looks at it and snoozes while the provider runs it (no worker slot
// and no model slot held in between), or, once the provider is done,
// stores every answer through the same parser and storage as a call.
// Requests the batch did not answer (expired, failed, unreadable) go to the
// model once more as calls; a batch failed as a whole is submitted again
// up to BatchMaxAttempts times, then its rows are FAILED with the
// provider's reason.
type BatchWorker struct {
	river.WorkerDefaults[BatchArgs]

	DB       db.Executor
	Batcher  Batcher
	Pipeline *classifier.Pipeline
	Registry *classifier.Registry
	Settings Settings
	Price    Pricer // nil: unpriced
	Logger   *slog.Logger
	Metrics  *Metrics
	Lists    *ListMetrics
	// MaxFileBytes is the provider's limit on an input file; 0 is
	// MaxBatchFileBytes.
	MaxFileBytes int
}

// Middleware cancels batch jobs whose args can never work.
func (w *BatchWorker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware {
	return cancelMalformed(func(a BatchArgs) error {
		if _, err := uuid.Parse(a.BatchID); err != nil {
			return fmt.Errorf("batch_id %q", a.BatchID)
		}
		return nil
	})
}

// Timeout: storing 50,000 answers, and the fallbacks' calls.
func (w *BatchWorker) Timeout(*river.Job[BatchArgs]) time.Duration { return w.Settings.JobTimeout }

// Work moves the batch one step. On the last attempt an error gives the
// batch's rows up (FAILED), so that the list still ends.
func (w *BatchWorker) Work(ctx context.Context, job *river.Job[BatchArgs]) error {
	err := w.step(ctx, job)
	var (
		snooze *rivertype.JobSnoozeError
		cancel *rivertype.JobCancelError
	)
	if err == nil || errors.As(err, &snooze) || errors.As(err, &cancel) || job.Attempt < job.MaxAttempts {
		return err
	}
	fctx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	if ferr := w.giveUp(fctx, uuid.MustParse(job.Args.BatchID), fmt.Sprintf("gave up after %d attempts: %v", job.Attempt, err)); ferr != nil {
		w.Logger.ErrorContext(ctx, "error giving a batch up", "batch", job.Args.BatchID, "error", ferr)
	}
	return err
}

func (w *BatchWorker) giveUp(ctx context.Context, id uuid.UUID, reason string) error {
	b, err := db.BatchGet(ctx, w.DB, id)
	if err != nil {
		return err
	}
	l, err := db.ListGet(ctx, w.DB, b.ListID)
	if err != nil {
		return err
	}
	if _, err := w.failRows(ctx, l, b, batchOwner(b.ID), reason); err != nil {
		return err
	}
	return w.end(ctx, w.Logger, b, l.ID, reason)
}

func (w *BatchWorker) step(ctx context.Context, job *river.Job[BatchArgs]) error {
	id := uuid.MustParse(job.Args.BatchID)
	b, err := db.BatchGet(ctx, w.DB, id)
	if errors.Is(err, db.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("batch %s does not exist", id))
	} else if err != nil {
		return err
	}
	log := w.Logger.With("batch", id.String(), "list_id", b.ListID.String(), "provider_batch_id", b.ProviderBatchID)
	if b.Status == db.BatchEnded || b.Status == db.BatchStaging {
		return nil
	}
	l, err := db.ListGet(ctx, w.DB, b.ListID)
	if err != nil {
		return err
	}
	owner := batchOwner(b.ID)
	if l.Ended() {
		return w.abandon(ctx, log, b, owner, "the list is "+string(l.Status))
	}
	c, err := w.Registry.Get(l.Classifier)
	if err != nil {
		return river.JobCancel(err)
	}

	if w.Batcher == nil {
		if _, err := w.failRows(ctx, l, b, owner, classifier.ErrNoLLM); err != nil {
			return err
		}
		return w.end(ctx, log, b, l.ID, classifier.ErrNoLLM)
	}
	if b.Status == db.BatchReady {
		err := w.submit(ctx, log, b)
		if errors.Is(err, errBatchTooLarge) {
			log.ErrorContext(ctx, "batch not sent; its requests are asked as calls (lower BATCH_MAX_REQUESTS)", "error", err)
			out := BatchOutput{ListID: l.ID.String()}
			if err := w.store(ctx, log, c, l, b, llm.BatchStatus{}, owner, &out); err != nil {
				return err
			}
			_ = river.RecordOutput(ctx, out)
			return w.end(ctx, log, b, l.ID, err.Error())
		}
		var rejected *llm.RejectedError
		if errors.As(err, &rejected) { // the provider will not take this file
			if _, err := w.failRows(ctx, l, b, owner, "the provider refused the batch: "+err.Error()); err != nil {
				return err
			}
			return w.end(ctx, log, b, l.ID, err.Error())
		}
		return err
	}
	st, err := w.Batcher.BatchGet(ctx, b.ProviderBatchID)
	if err != nil {
		return w.providerErr(err)
	}
	if err := db.BatchProviderStatus(ctx, w.DB, b.ID, st.Status); err != nil {
		return err
	}
	out := BatchOutput{ListID: l.ID.String(), ProviderBatchID: st.ID, ProviderStatus: st.Status}
	if st.Running() {
		_ = river.RecordOutput(ctx, out)
		return river.JobSnooze(w.Settings.BatchPollInterval)
	}
	if st.Status == "failed" {
		if b.Attempts < w.Settings.BatchMaxAttempts {
			log.WarnContext(ctx, "provider failed the batch; submitting it again", "reason", st.Error, "attempt", b.Attempts)
			if err := db.BatchResubmit(ctx, w.DB, b.ID, st.Error); err != nil {
				return err
			}
			return river.JobSnooze(w.Settings.BatchPollInterval)
		}
		out.Failed, err = w.failRows(ctx, l, b, owner, fmt.Sprintf("the provider failed the batch %d times: %s", b.Attempts, st.Error))
		if err != nil {
			return err
		}
		_ = river.RecordOutput(ctx, out)
		return w.end(ctx, log, b, l.ID, st.Error)
	}

	// completed, expired or cancelled: store what it answered; ask again,
	// one call each, what it did not.
	if err := w.store(ctx, log, c, l, b, st, owner, &out); err != nil {
		return err
	}
	_ = river.RecordOutput(ctx, out)
	return w.end(ctx, log, b, l.ID, "")
}

func batchOwner(id uuid.UUID) string { return "batch:" + id.String() }

// MaxBatchFileBytes is the provider's limit on a batch input file (OpenAI:
// 200 MB).
const MaxBatchFileBytes = 200 << 20

// errBatchTooLarge: the batch's file is over MaxBatchFileBytes; its
// requests are asked as calls instead.
var errBatchTooLarge = errors.New("the batch file is over the provider's limit")

// submit uploads the batch's requests and starts the provider's batch.
// The provider's batch carries our id and attempt, so that a run that died
// after creating it finds it instead of paying for a second.
func (w *BatchWorker) submit(ctx context.Context, log *slog.Logger, b *db.Batch) error {
	key := b.ID.String() + "/" + strconv.Itoa(b.Attempts+1)
	st, found, err := w.Batcher.BatchFind(ctx, key)
	if err != nil {
		return w.providerErr(err)
	}
	if !found {
		var input bytes.Buffer
		n := 0
		err := db.BatchItems(ctx, w.DB, b.ID, func(it db.BatchItem) error {
			var req classifier.CompletionRequest
			if err := json.Unmarshal(it.Body, &req); err != nil {
				return fmt.Errorf("staged request of %s: %w", it.Domain, err)
			}
			line, err := w.Batcher.BatchLine(it.Domain, req)
			if err != nil {
				return err
			}
			input.Write(line)
			input.WriteByte('\n')
			n++
			return nil
		})
		if err != nil {
			return err
		}
		if n == 0 { // every row was answered meanwhile (a cancel, a redelivery)
			return w.end(ctx, log, b, b.ListID, "")
		}
		if input.Len() > cmp.Or(w.MaxFileBytes, MaxBatchFileBytes) {
			return fmt.Errorf("%w: %d requests make %d MB", errBatchTooLarge, n, input.Len()>>20)
		}
		if st, err = w.Batcher.BatchSubmit(ctx, &input, key); err != nil {
			return w.providerErr(err)
		}
		log.InfoContext(ctx, "batch submitted", "requests", n, "provider_batch_id", st.ID)
	}
	if err := db.BatchSubmit(ctx, w.DB, b.ID, st.ID, st.Status); err != nil {
		return err
	}
	return river.JobSnooze(w.Settings.BatchPollInterval)
}

// store reads an ended provider batch: each answer is stored as a call's
// would be (source llm, the batch named); each request it did not answer
// is asked again as a call, once.
func (w *BatchWorker) store(ctx context.Context, log *slog.Logger, c *classifier.Classifier, l *classifier.List,
	b *db.Batch, st llm.BatchStatus, owner string, out *BatchOutput) error {
	// What Verdict needs of each request (its model, prompt version and
	// evidence); the prompts themselves (2 to 6 kB each) are read again
	// only for the fallbacks.
	items := map[string]db.BatchItem{}
	reqs := map[string]classifier.Prepared{}
	err := db.BatchItems(ctx, w.DB, b.ID, func(it db.BatchItem) error {
		var req struct{ Model string }
		if err := json.Unmarshal(it.Body, &req); err != nil {
			return fmt.Errorf("staged request of %s: %w", it.Domain, err)
		}
		it.Body = nil
		items[it.Domain] = it
		reqs[it.Domain] = classifier.Prepared{Domain: it.Domain, Request: classifier.CompletionRequest{Model: req.Model},
			PromptVersion: it.PromptVersion, Search: it.Search, Sources: it.Evidence}
		return nil
	})
	if err != nil {
		return err
	}
	answered := map[string]bool{}
	err = w.Batcher.BatchResults(ctx, st, func(res llm.BatchResult) error {
		it, ok := items[res.CustomID]
		if !ok || answered[res.CustomID] {
			return nil // not ours, or already final
		}
		if res.Err != nil {
			log.DebugContext(ctx, "batch did not answer a request; it will be asked as a call", "domain", it.Domain, "reason", res.Err)
			return nil
		}
		r := w.Pipeline.Verdict(c, reqs[it.Domain], res.Response)
		r.BatchID = st.ID
		if w.Price != nil {
			r.Usage.CostUSD = w.Price(r.Model, r.Usage, true)
		}
		w.Metrics.BatchTokens(r.Usage)
		if err := w.storeAnswer(ctx, l, it, r, owner, classifier.TierEconomy); err != nil {
			return err
		}
		answered[res.CustomID] = true
		out.Answered++
		return nil
	})
	if err != nil {
		return w.providerErr(err)
	}

	// The fallbacks, in the list's turn (fair share): the requests still
	// pending, read whole this time.
	ctx = llm.WithShare(ctx, llm.Share{Class: llm.ClassList, Caller: l.Caller, List: l.ID.String()})
	var fallbacks []classifier.Prepared
	err = db.BatchItems(ctx, w.DB, b.ID, func(it db.BatchItem) error {
		pr := reqs[it.Domain]
		if err := json.Unmarshal(it.Body, &pr.Request); err != nil {
			return fmt.Errorf("staged request of %s: %w", it.Domain, err)
		}
		fallbacks = append(fallbacks, pr)
		return nil
	})
	if err != nil {
		return err
	}
	for _, pr := range fallbacks {
		it := items[pr.Domain]
		r, err := w.fallback(ctx, c, pr)
		if err != nil {
			return err // River retries; the answered ones are final and skipped
		}
		if w.Price != nil && r.Usage != nil {
			r.Usage.CostUSD = w.Price(r.Model, r.Usage, false)
		}
		if err := w.storeAnswer(ctx, l, it, r, owner, classifier.TierStandard); err != nil {
			return err
		}
		out.Fallbacks++
	}
	if out.Fallbacks > 0 {
		log.InfoContext(ctx, "batch requests answered by calls instead", "fallbacks", out.Fallbacks, "provider_status", st.Status)
	}
	return nil
}

// fallback answers a request the batch did not: by the domain's override
// when one was set while the batch ran, else by a call.
func (w *BatchWorker) fallback(ctx context.Context, c *classifier.Classifier, pr classifier.Prepared) (classifier.Result, error) {
	if r, err := w.Pipeline.Override(ctx, c, pr.Domain); err != nil {
		return classifier.Result{}, err
	} else if r != nil {
		return *r, nil
	}
	return w.Pipeline.Ask(ctx, c, pr)
}

// storeAnswer stores one answer of the list (and its duplicates) and releases
// the batch's claim on its domain.
func (w *BatchWorker) storeAnswer(ctx context.Context, l *classifier.List, it db.BatchItem, r classifier.Result, owner, tier string) error {
	n, err := db.ListRowFinish(ctx, w.DB, l.ID, it.Row, r, owner)
	if err != nil {
		return err
	}
	w.Lists.ListRows(r.Status, n)
	w.Metrics.DomainResult(r)
	w.Metrics.LLMCost(tier, r.Usage.Cost())
	return nil
}

// failRows fails every row of the batch not final yet, with reason.
func (w *BatchWorker) failRows(ctx context.Context, l *classifier.List, b *db.Batch, owner, reason string) (int, error) {
	var its []db.BatchItem
	if err := db.BatchItems(ctx, w.DB, b.ID, func(it db.BatchItem) error { its = append(its, it); return nil }); err != nil {
		return 0, err
	}
	for _, it := range its {
		r := classifier.Result{Domain: it.Domain, Classifier: l.Classifier, Status: classifier.StatusFailed,
			Source: classifier.SourceLLM, Error: reason, ClassifiedAt: time.Now().UTC()}
		if err := w.storeAnswer(ctx, l, it, r, owner, classifier.TierEconomy); err != nil {
			return 0, err
		}
	}
	return len(its), nil
}

// abandon ends a batch whose list has ended: the provider's batch is
// cancelled (what it has answered is not stored: the list's rows are
// CANCELLED) and the claims are given up.
func (w *BatchWorker) abandon(ctx context.Context, log *slog.Logger, b *db.Batch, owner, reason string) error {
	if b.Status == db.BatchSubmitted {
		st, err := w.Batcher.BatchCancel(ctx, b.ProviderBatchID)
		var rejected *llm.RejectedError
		switch {
		case errors.As(err, &rejected):
			log.InfoContext(ctx, "provider batch had ended already", "reason", err)
		case err != nil:
			return w.providerErr(err)
		default:
			log.InfoContext(ctx, "provider batch cancelled", "provider_status", st.Status)
		}
	}
	if err := db.ClaimsRelease(ctx, w.DB, owner); err != nil {
		return err
	}
	return db.BatchEnd(ctx, w.DB, b.ID, reason)
}

// end marks the batch ended, gives up its claims that remain, and ends the
// list when this was its last work.
func (w *BatchWorker) end(ctx context.Context, log *slog.Logger, b *db.Batch, listID uuid.UUID, reason string) error {
	if err := db.ClaimsRelease(ctx, w.DB, batchOwner(b.ID)); err != nil {
		return err
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx, w.DB)
	if err != nil {
		return err
	}
	defer db.Rollback(ctx, tx)
	if err := db.BatchEnd(ctx, tx, b.ID, reason); err != nil {
		return err
	}
	ended, err := completeListTx(ctx, tx, client, listID, w.Settings)
	if err != nil {
		return err
	}
	if err := db.Commit(ctx, tx); err != nil {
		return err
	}
	if ended {
		w.Lists.ListEnded(classifier.StatusCompleted)
		log.InfoContext(ctx, "list completed")
	}
	return nil
}

// providerErr snoozes a throttled batch API call and returns any other
// error as it is: River retries the run, and on its last attempt Work fails
// the batch's rows (a refused submission is handled in step, at once).
func (w *BatchWorker) providerErr(err error) error {
	if ra, ok := classifier.RetryAfter(err); ok {
		return river.JobSnooze(min(max(ra, time.Second), w.Settings.MaxSnooze))
	}
	return err
}
