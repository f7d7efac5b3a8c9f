package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// storeAndEnd stores what an ended provider batch answered (st; none for a
// batch never sent), asks the rest as calls, records the run's output and
// ends the batch with reason.
func (r *batchRun) storeAndEnd(ctx context.Context, st llm.BatchStatus, reason string) error {
	if r.items == nil {
		if err := r.readItems(ctx, nil); err != nil {
			return err
		}
	}
	if err := r.storeAnswers(ctx, st); err != nil {
		return err
	}
	if err := r.askUnanswered(ctx, st); err != nil {
		return err
	}
	_ = river.RecordOutput(ctx, r.out)
	return r.end(ctx, reason)
}

// storeAnswers stores the answers of the provider's batch as a call's would
// be (source llm, the batch named, at the batch price), storeSetRows at a
// time, each set in one statement (db.ListRowsFinish). A request it did not
// answer (failed, unreadable, expired) is left to askUnanswered.
func (r *batchRun) storeAnswers(ctx context.Context, st llm.BatchStatus) error {
	var (
		set   []db.RowAnswer
		items []*batchItem
	)
	flush := func() error {
		if len(set) == 0 {
			return nil
		}
		n, err := db.ListRowsFinish(ctx, r.w.DB, r.l.ID, set, r.owner)
		if err != nil {
			return err
		}
		r.w.Lists.ListRows(classifier.StatusCompleted, n)
		for i, it := range items {
			r.settle(it, set[i].Result)
			r.w.Metrics.DomainResult(set[i].Result)
			r.w.Metrics.LLMCost(classifier.TierEconomy, set[i].Result.Usage.Cost())
			it.answered = true
			r.out.Answered++
		}
		set, items = set[:0], items[:0]
		return nil
	}
	err := r.w.Batcher.BatchResults(ctx, st, func(res llm.BatchResult) error {
		it, ok := r.byDomain[res.CustomID]
		if !ok || it.answered {
			return nil // not ours, or already final
		}
		if res.Err != nil {
			r.log.DebugContext(ctx, "batch did not answer a request; it will be asked as a call", "domain", it.Domain, "reason", res.Err)
			return nil
		}
		answer := r.verdict(it, res.Response, st.ID)
		r.w.Metrics.BatchTokens(answer.Usage)
		if it.Lost {
			// A call took the domain over while the batch ran: its answer
			// is the one stored and paid for; this one is not charged again.
			if a, err := r.w.Pipeline.Answered(ctx, r.c, it.Domain, r.l.Want); err != nil {
				return err
			} else if a != nil {
				answer = *a
			}
		}
		set, items = append(set, db.RowAnswer{Row: it.Row, Result: answer}), append(items, it)
		if len(set) >= storeSetRows {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return r.w.providerErr(err)
}

// storeSetRows is how many of a batch's answers one statement stores: a
// thousand, a fraction of a second's work, so that the list's progress
// moves as a large batch is stored.
const storeSetRows = 1000

// verdict parses the batch's answer to a request, as a call's is parsed,
// and prices it at the batch price.
func (r *batchRun) verdict(it *batchItem, resp classifier.CompletionResponse, batchID string) classifier.Result {
	answer := r.w.Pipeline.Verdict(r.c, it.prepared, resp)
	answer.BatchID = batchID
	if r.w.Price != nil {
		answer.Usage.CostUSD = r.w.Price.Usage(answer.Model, answer.Usage, true)
	}
	return answer
}

// askUnanswered answers each request the batch did not, once, in the
// list's turn (fair share): by the domain's override when one was set while
// the batch ran, else by a call at the standard price. An error leaves the
// rest to River's retry; the answered ones are final and skipped.
func (r *batchRun) askUnanswered(ctx context.Context, st llm.BatchStatus) error {
	call := classifier.CallOptions{Share: classifier.Share{Class: classifier.ClassList, Caller: r.l.Caller, List: r.l.ID.String()}}
	fallbacks, err := r.unansweredRequests(ctx)
	if err != nil {
		return err
	}
	for _, it := range fallbacks {
		answer, err := r.fallback(ctx, it, call)
		if err != nil {
			return err
		}
		if r.w.Price != nil && answer.Usage != nil {
			answer.Usage.CostUSD = r.w.Price.Usage(answer.Model, answer.Usage, false)
		}
		if err := r.storeAnswer(ctx, it, answer, classifier.TierStandard); err != nil {
			return err
		}
		it.answered = true
		r.out.Fallbacks++
	}
	if r.out.Fallbacks > 0 {
		r.log.InfoContext(ctx, "batch requests answered by calls instead", "fallbacks", r.out.Fallbacks, "provider_status", st.Status)
	}
	return nil
}

// unansweredRequests are the batch's requests still pending, their prompts
// read again: readItems keeps none, since a batch holds up to
// BatchMaxRequests of them and only the fallbacks need theirs.
func (r *batchRun) unansweredRequests(ctx context.Context) ([]*batchItem, error) {
	var pending []*batchItem
	err := db.BatchItems(ctx, r.w.DB, r.b.ID, r.owner, func(row db.BatchItem) error {
		it, ok := r.byDomain[row.Domain]
		if !ok || it.answered {
			return nil
		}
		if err := json.Unmarshal(row.Body, &it.prepared.Request); err != nil {
			return fmt.Errorf("staged request of %s: %w", row.Domain, err)
		}
		it.Lost = row.Lost
		pending = append(pending, it)
		return nil
	})
	return pending, err
}

// fallback answers a request the batch did not: by the domain's override
// when one was set while the batch ran, or the answer of a call that took
// the domain over, else by a call (counted against the caller's budget
// when it was staged). A domain whose claim a call took and holds still is
// that call's to answer: the batch's job looks again after a snooze.
func (r *batchRun) fallback(ctx context.Context, it *batchItem, call classifier.CallOptions) (classifier.Result, error) {
	if a, err := r.w.Pipeline.Answered(ctx, r.c, it.Domain, r.l.Want); err != nil {
		return classifier.Result{}, err
	} else if a != nil {
		return *a, nil
	}
	if it.Lost {
		holder, ok, err := db.ClaimAcquire(ctx, r.w.DB, r.c.Name, it.Domain, r.owner, r.w.Settings.BatchClaimTTL(), true)
		if err != nil {
			return classifier.Result{}, err
		} else if !ok {
			r.log.InfoContext(ctx, "a call holds a domain of the batch; looking again shortly", "domain", it.Domain, "holder", holder.Owner)
			return classifier.Result{}, river.JobSnooze(r.w.Settings.BusySnooze)
		}
	}
	return r.w.Pipeline.Ask(ctx, r.c, it.prepared, call)
}

// storeAnswer stores one answer of the list (and its duplicates), releases
// the batch's claim on its domain, and counts it.
func (r *batchRun) storeAnswer(ctx context.Context, it *batchItem, answer classifier.Result, tier string) error {
	n, err := db.ListRowFinish(ctx, r.w.DB, r.l.ID, it.Row, answer, r.owner)
	if err != nil {
		return err
	}
	r.settle(it, answer)
	r.w.Lists.ListRows(answer.Status, n)
	r.w.Metrics.DomainResult(answer)
	r.w.Metrics.LLMCost(tier, answer.Usage.Cost())
	return nil
}

// settle corrects what staging counted for it against the caller's budget
// once it is answered: to the real price of the call that answered it
// (the batch's, or a fallback's), or given back when no call of the batch
// did (an override, a call that took the domain over, a refused batch).
// settleSpend writes the run's corrections.
func (r *batchRun) settle(it *batchItem, answer classifier.Result) {
	if it.SpendDay.IsZero() {
		return // nothing was counted (no budgets, or staged before they were)
	}
	sp := r.spend[it.SpendDay]
	if answer.Usage != nil && answer.Source == classifier.SourceLLM {
		sp.USD += answer.Usage.CostUSD - it.SpendUSD
	} else {
		sp.Calls--
		sp.USD -= it.SpendUSD
	}
	r.spend[it.SpendDay] = sp
}

// settleSpend writes what the run settled, one statement a day it was
// counted on, once the run ends (whatever its outcome). A run killed
// before this leaves the answers it stored at their staged estimate.
func (r *batchRun) settleSpend(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTryTimeout)
	defer cancel()
	for day, sp := range r.spend {
		if sp.Calls == 0 && sp.USD == 0 {
			continue
		}
		if err := db.CallerSpendAdd(ctx, r.w.DB, r.l.Caller, day, sp.Calls, sp.USD); err != nil {
			r.log.WarnContext(ctx, "error settling the batch's staged model calls", "caller", r.l.Caller, "error", err)
			continue
		}
		delete(r.spend, day)
	}
}
