package llm

import "github.com/domainclass/domainclass/classifier"

// A call's tokens before any call was measured: the cpg prompt with a
// homepage's evidence, and a one-line verdict. A dry run's estimate and a
// caller's spend budget price a call at these until the model's recent
// calls say otherwise.
const (
	DefaultPromptTokens     = 800
	DefaultCompletionTokens = defaultCompletionTokens
)

// A Pricer is the deployment's price of a model call, in US dollars: of
// promptTokens and completionTokens of model (means, for an estimate), at
// the Batch API's price when batch. ok is false for a model the price
// table does not list. One Pricer serves the dry run's estimate, the
// callers' spend budgets and the cost stored with each answer, so that
// all three agree.
type Pricer func(model string, promptTokens, completionTokens float64, batch bool) (usd float64, ok bool)

// Usage is p's price of a call's usage: 0 when p is nil, there is no
// usage, or the table does not list model.
func (p Pricer) Usage(model string, u *classifier.Usage, batch bool) float64 {
	if p == nil || u == nil {
		return 0
	}
	usd, _ := p(model, float64(u.PromptTokens), float64(u.CompletionTokens), batch)
	return usd
}
