package wire

import "time"

// CallerReport is the body of GET /callers/me: who the key is, its limits,
// and its daily model budget with what its work used of it today (UTC).
type CallerReport struct {
	Caller string `json:"caller"`
	// Day is today (UTC), which ends at ResetsAt: the budget refills then.
	Day       string       `json:"day"`
	ResetsAt  time.Time    `json:"resets_at"`
	Usage     ModelUsage   `json:"usage"`
	Budget    ModelBudget  `json:"budget"`
	Remaining ModelBudget  `json:"remaining"`
	Limits    CallerLimits `json:"limits"`
}

// ModelUsage is what a caller's jobs and lists asked of the model today:
// calls (refreshes and economy batches included; a call in flight counts)
// and their price from the price table, in US dollars.
type ModelUsage struct {
	ModelCalls int `json:"model_calls"`
	// CostUSD is named as money is everywhere in the API (a list's
	// cost_usd, an estimate's estimated_cost_usd).
	CostUSD float64 `json:"cost_usd"`
	// SpendUSD is CostUSD under its first name, kept for one release.
	//
	// Deprecated: read CostUSD.
	SpendUSD float64 `json:"spend_usd"`
}

// ModelBudget is a daily budget, or what is left of it; null is no limit.
type ModelBudget struct {
	ModelCalls *int     `json:"model_calls"`
	CostUSD    *float64 `json:"cost_usd"`
	// SpendUSD is CostUSD under its first name, kept for one release.
	//
	// Deprecated: read CostUSD.
	SpendUSD *float64 `json:"spend_usd"`
}

// CallerLimits are a caller's request limits (see docs/api.md, "Limits").
type CallerLimits struct {
	RatePerMinute    int `json:"rate_per_minute"`
	MaxQueuedDomains int `json:"max_queued_domains"`
	MaxActiveLists   int `json:"max_active_lists"`
	MaxStoredRows    int `json:"max_stored_rows"`
	// MaxUploads is per API process: uploads read at once.
	MaxUploads int `json:"max_uploads"`
	// MaxDownloads is per API process: result downloads sent at once.
	MaxDownloads int `json:"max_downloads"`
}
