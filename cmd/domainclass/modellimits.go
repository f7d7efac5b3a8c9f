package main

import (
	"cmp"

	"github.com/domainclass/domainclass/capacity"
)

// modelLimits are a worker's model limits as configured, each named by its
// variable; what they mean, and which wins, is package capacity's
// (limits.go).
func (c Config) modelLimits() capacity.Limits {
	return capacity.Limits{
		AccountRPM:           capacity.Setting{Value: c.LLMAccountRPM, Name: "LLM_ACCOUNT_RPM"},
		AccountTPM:           capacity.Setting{Value: c.LLMAccountTPM, Name: "LLM_ACCOUNT_TPM"},
		AccountConcurrency:   capacity.Setting{Value: c.LLMAccountConcurrency, Name: "LLM_ACCOUNT_CONCURRENCY"},
		ProcessConcurrency:   capacity.Setting{Value: c.LLMMaxConcurrency, Name: "LLM_MAX_CONCURRENCY"},
		ProcessRatePerMinute: capacity.Setting{Value: c.LLMRatePerMinute, Name: "LLM_RATE_PER_MINUTE"},
	}
}

// modelConns is how many idle connections to the model's (and search's)
// provider a process keeps: its calls in flight when it caps them, else
// enough for a rate-bound process's (64: 40 a second of 1.5 s calls).
func (c Config) modelConns() int { return cmp.Or(c.LLMMaxConcurrency, 64) }

// readyDetail is what a worker's readiness says beside "ok": that no limit
// of the model account is known, while none is ("" otherwise).
func (m *Main) readyDetail() string {
	if m.capacity == nil || m.capacity.LimitKnown() {
		return ""
	}
	return m.Config.modelLimits().Unknown()
}
