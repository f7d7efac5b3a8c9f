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

// storeAnswers stores each answer of the provider's batch as a call's would
// be (source llm, the batch named, at the batch price). A request it did not
// answer (failed, unreadable, expired) is left to askUnanswered.
func (r *batchRun) storeAnswers(ctx context.Context, st llm.BatchStatus) error {
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
		if err := r.storeAnswer(ctx, it, answer, classifier.TierEconomy); err != nil {
			return err
		}
		it.answered = true
		r.out.Answered++
		return nil
	})
	return r.w.providerErr(err)
}

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
		answer, err := r.fallback(ctx, it.prepared, call)
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
	err := db.BatchItems(ctx, r.w.DB, r.b.ID, func(row db.BatchItem) error {
		it, ok := r.byDomain[row.Domain]
		if !ok || it.answered {
			return nil
		}
		if err := json.Unmarshal(row.Body, &it.prepared.Request); err != nil {
			return fmt.Errorf("staged request of %s: %w", row.Domain, err)
		}
		pending = append(pending, it)
		return nil
	})
	return pending, err
}

// fallback answers a request the batch did not: by the domain's override
// when one was set while the batch ran, else by a call (counted against
// the caller's budget when it was staged).
func (r *batchRun) fallback(ctx context.Context, pr classifier.Prepared, call classifier.CallOptions) (classifier.Result, error) {
	if o, err := r.w.Pipeline.Override(ctx, r.c, pr.Domain); err != nil {
		return classifier.Result{}, err
	} else if o != nil {
		return *o, nil
	}
	return r.w.Pipeline.Ask(ctx, r.c, pr, call)
}

// storeAnswer stores one answer of the list (and its duplicates), releases
// the batch's claim on its domain, and counts it.
func (r *batchRun) storeAnswer(ctx context.Context, it *batchItem, answer classifier.Result, tier string) error {
	n, err := db.ListRowFinish(ctx, r.w.DB, r.l.ID, it.Row, answer, r.owner)
	if err != nil {
		return err
	}
	r.w.Lists.ListRows(answer.Status, n)
	r.w.Metrics.DomainResult(answer)
	r.w.Metrics.LLMCost(tier, answer.Usage.Cost())
	return nil
}
