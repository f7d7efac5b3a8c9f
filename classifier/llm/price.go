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
// table does not list. The deployment's is DefaultPrices().Price; every
// cost is asked of it through CallCost.
type Pricer func(model string, promptTokens, completionTokens float64, batch bool) (usd float64, ok bool)

// Tokens are a model call's prompt and completion tokens: one call's
// usage, or the mean of recent calls for an estimate.
type Tokens struct {
	Prompt, Completion float64
}

// DefaultTokens are a call's tokens before any call was measured.
var DefaultTokens = Tokens{Prompt: DefaultPromptTokens, Completion: DefaultCompletionTokens}

// MeanTokens are the tokens an estimate prices a call at: the mean of the
// samples recent calls measured, or DefaultTokens when there are none.
func MeanTokens(samples int, prompt, completion float64) Tokens {
	if samples <= 0 {
		return DefaultTokens
	}
	return Tokens{Prompt: prompt, Completion: completion}
}

// CallCost is what one call of model costs by p, in US dollars: of tokens,
// at the Batch API's price in classifier.TierEconomy and the standard one
// in any other tier. ok is false when p is nil or does not list model.
// It is the one price of a call: the dry run's estimate, a list's budget
// check at upload, the callers' spend accounting (so GET /callers/me) and
// the cost stored with each answer all ask it.
func (p Pricer) CallCost(model string, tokens Tokens, tier string) (usd float64, ok bool) {
	if p == nil {
		return 0, false
	}
	return p(model, tokens.Prompt, tokens.Completion, tier == classifier.TierEconomy)
}

// Usage is CallCost of a call's usage, at the Batch API's price when
// batch: 0 when there is no usage or p does not list model.
func (p Pricer) Usage(model string, u *classifier.Usage, batch bool) float64 {
	if u == nil {
		return 0
	}
	usd, _ := p.CallCost(model, Tokens{Prompt: float64(u.PromptTokens), Completion: float64(u.CompletionTokens)}, tierOf(batch))
	return usd
}

// tierOf is the tier whose price a call at the Batch API's price (batch)
// or not is charged at.
func tierOf(batch bool) string {
	if batch {
		return classifier.TierEconomy
	}
	return classifier.TierStandard
}
