package httpapi

import (
	"math"
	"runtime"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// How long a list takes (the dry run's estimated_seconds), from what this
// deployment measurably does rather than from the model's latency alone
// (issue 27: "about 11m" for a million rows that took hours on a loaded
// two-core machine, and 51 s for 10k rows while another list shared the
// slots). Two resources bound a list, and the slower one decides:
//
//   - the model: fresh domains at the model answers a second the
//     deployment gave while lists ran in the last throughputWindow
//     (db.LoadRecent), all its worker processes together; without enough
//     of that, at what the configured bounds allow one worker process
//     (LLM_MAX_CONCURRENCY calls of the median recent latency at once,
//     capped by LLM_RATE_PER_MINUTE);
//   - the CPU: every row, fresh or cached, costs the service and Postgres
//     about rowCPUSeconds, on Cores CPUs.
//
// The capacity is shared with the lists not yet ended, evenly (fair share,
// docs/architecture.md): while ours has work left, each of them takes as
// much as ours of it, so ours ends after its own work plus, from each
// other list, the smaller of that list's work left and its own.

// throughputWindow is how far back the estimate reads what the deployment
// did: long enough to span several chunks of a list (minutes), short
// enough to describe the load of now. throughputStep is the grain at which
// lists are seen running.
const (
	throughputWindow = 15 * time.Minute
	throughputStep   = 10 * time.Second
)

// A measured rate needs a minute of lists running and 20 answers in it;
// less says more about chance than about the deployment.
const (
	measuredMinBusy    = 60.0
	measuredMinAnswers = 20
)

// rowCPUSeconds is the CPU one row of a list costs the service and
// Postgres together, however it is answered (looked up, written, its
// counters updated): 2.5–4.3 ms in the service and 4.2–7.5 ms in Postgres
// (measured on two cores under load, issue 27); so two free cores finish
// about 250 rows a second whatever the model does.
const rowCPUSeconds = 0.008

// DefaultCallSeconds is the estimate's time for one fresh domain before
// any model call was measured: search ≈ 0.5–1 s and model ≈ 1.5 s.
const DefaultCallSeconds = 2.5

// Estimator is what a list's estimate (the dry run) and a caller's budget
// check are computed from.
type Estimator struct {
	// Model is the model the workers ask, and Price its price per call
	// (nil: unpriced), the same Pricer the workers charge the callers'
	// spend with.
	Model string
	Price llm.Pricer
	// ModelConcurrency and ModelRatePerMinute are the bounds of one worker
	// process (LLM_MAX_CONCURRENCY, LLM_RATE_PER_MINUTE).
	ModelConcurrency   int
	ModelRatePerMinute int
	// DefaultCallSeconds is a fresh domain's time before any call was
	// measured; SearchSeconds the search's share of one (the measured
	// latency is the model's).
	DefaultCallSeconds float64
	SearchSeconds      float64
	// Cores is the CPUs the rows' work shares (the service and Postgres);
	// 0 is this machine's.
	Cores int
	// Freshness is the cache policy: which domains are answered without
	// the model.
	Freshness classifier.Freshness
}

// DefaultEstimator is an estimator of the model bounds' defaults (llm's)
// and the reviewed cache policy, for an unnamed, unpriced model.
func DefaultEstimator() Estimator {
	return Estimator{ModelConcurrency: llm.DefaultMaxConcurrency, ModelRatePerMinute: llm.DefaultRatePerMinute,
		DefaultCallSeconds: DefaultCallSeconds, Freshness: classifier.DefaultFreshness()}
}

func (l Estimator) withDefaults() Estimator {
	def := DefaultEstimator()
	if l.ModelConcurrency <= 0 || l.ModelRatePerMinute <= 0 {
		l.ModelConcurrency, l.ModelRatePerMinute = def.ModelConcurrency, def.ModelRatePerMinute
	}
	if l.DefaultCallSeconds <= 0 {
		l.DefaultCallSeconds = def.DefaultCallSeconds
	}
	if l.Freshness == (classifier.Freshness{}) {
		l.Freshness = def.Freshness
	}
	return l
}

// estimate is what the fresh domains cost in each tier (nil for a model
// the price table does not list), how long the list takes in the standard
// tier (see above) and what that time came from; in the economy tier, the
// provider's 24-hour window.
func (l Estimator) estimate(est wire.ListEstimate, stats db.ModelStats, load db.Load) (standard, economy wire.TierEstimate, basis wire.EstimateBasis) {
	promptTokens, completionTokens := float64(llm.DefaultPromptTokens), float64(llm.DefaultCompletionTokens)
	if stats.Samples > 0 {
		promptTokens, completionTokens = stats.PromptTokens, stats.CompletionTokens
	}
	basis = l.basis(stats, load)
	fresh, rows := float64(est.LLM), float64(est.Domains+est.Duplicates)
	modelWork, rowWork := fresh, rows
	for _, o := range load.Others {
		modelWork += math.Min(o.ModelRows, fresh)
		rowWork += math.Min(o.Rows, rows)
		basis.ListsSharing++
	}
	seconds := math.Max(modelWork/basis.ModelAnswersPerSecond, rowWork/basis.RowsPerSecond)
	seconds = math.Round(seconds*10) / 10
	standard.EstimatedSeconds, economy.EstimatedSeconds = seconds, batchWindowSeconds
	if est.LLM == 0 {
		economy.EstimatedSeconds = seconds
	}
	basis.ModelAnswersPerSecond = math.Round(basis.ModelAnswersPerSecond*100) / 100
	basis.RowsPerSecond = math.Round(basis.RowsPerSecond*100) / 100
	if l.Price == nil {
		return standard, economy, basis
	}
	for _, t := range []struct {
		into  *wire.TierEstimate
		batch bool
	}{{&standard, false}, {&economy, true}} {
		if perCallUSD, ok := l.Price(l.Model, promptTokens, completionTokens, t.batch); ok {
			cost := math.Round(perCallUSD*float64(est.LLM)*1e6) / 1e6 // to the micro-dollar: a small list costs fractions of a cent
			t.into.EstimatedCostUSD = &cost
		}
	}
	return standard, economy, basis
}

// basis is the model answers a second (measured, or from the configured
// bounds) and the rows a second the CPU allows.
func (l Estimator) basis(stats db.ModelStats, load db.Load) wire.EstimateBasis {
	var b wire.EstimateBasis
	if load.BusySeconds >= measuredMinBusy && load.ModelAnswers >= measuredMinAnswers {
		b.ModelAnswersPerSecond, b.Measured = float64(load.ModelAnswers)/load.BusySeconds, true
	} else {
		perCall := l.DefaultCallSeconds
		if stats.Samples > 0 {
			perCall = stats.MedianLatency.Seconds() + l.SearchSeconds
		}
		// Little's law: C calls in flight of perCall seconds each make
		// C/perCall a second, unless the rate limit allows fewer.
		b.ModelAnswersPerSecond = math.Min(float64(l.ModelConcurrency)/math.Max(perCall, 0.001), float64(l.ModelRatePerMinute)/60)
	}
	b.ModelAnswersPerSecond = math.Max(b.ModelAnswersPerSecond, 1e-3)
	cores := l.Cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	b.RowsPerSecond = float64(cores) / rowCPUSeconds
	return b
}
