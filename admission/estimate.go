package admission

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
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
// slots). A list's rows answered by overrides and the cache come first,
// as sets (its upload answers them all when the list is mostly answered,
// else its first chunk does, issue 37); then two
// resources bound its fresh domains, and the slower one decides:
//
//   - the model: fresh domains at the model answers a second the
//     deployment gave while lists ran, and the model answered, in the last
//     throughputWindow (db.LoadRecent; a stall, with no answer, is not
//     counted), all its worker processes together; without enough of
//     that, at what the configured bounds allow one worker process
//     (LLM_MAX_CONCURRENCY calls of the median recent latency at once, or
//     of DefaultCallSeconds before any call was measured, capped by
//     LLM_RATE_PER_MINUTE);
//   - the rows: each fresh domain's rows at about freshRowCPUSeconds of CPU
//     each on Cores CPUs (a domain's look-ups and store).
//
// The rows answered without the model go at the rows a second the
// deployment's recent lists answered so (rowsWindow), or, without one, at
// about setRowCPUSeconds of CPU each on Cores CPUs.
//
// The basis says which of these bounds the time, and its summary says it
// in a sentence with the setting that raises it (issue 36: a new user's
// dry run said 3h12m, and only its JSON basis said why).
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

// setRowCPUSeconds is what one row answered by an override or the cache
// costs, answered as a set (db.ListRowsAccept at the upload, or
// db.ListAnswerKnown), when no recent list says: a million such rows went
// from upload to COMPLETED in 13.5–20.3 s, upload included, on two cores
// shared with other work (docs/BENCHMARKS.md, the sets section), 27–40 µs
// of CPU a row; 50 µs is within 2× of it.
const setRowCPUSeconds = 0.00005

// freshRowCPUSeconds is what one row of a fresh domain costs the service
// and Postgres beside its model call (the domain's look-ups, claim and
// store): the 4 ms a row of before sets (issue 36's measure).
const freshRowCPUSeconds = 0.004

// A measured rate of rows needs recent lists answered without the model:
// within a day (the CPU a row costs changes with the code and the
// machine, not by the minute), and together at least a thousand rows.
const (
	rowsWindow      = 24 * time.Hour
	rowsMinMeasured = 1000
)

// DefaultCallSeconds is the estimate's time for one model call before any
// was measured (the search's, SearchSeconds, comes on top): small models
// answer the one-line verdict of a short prompt in about a second (issue
// 36: the 2.5 s of before, with the search, was ten times a new user's).
// The model call's timeout (LLM_TIMEOUT) bounds the slowest call, and is
// no guess of the usual one.
const DefaultCallSeconds = 1.0

// DefaultSearchSeconds is a search's share of a fresh domain's time, which
// the measured model latency leaves out: a homepage fetch or a Brave query
// takes about half a second to a second.
const DefaultSearchSeconds = 0.7

// Estimator is what a list's estimate (the dry run) and a caller's budget
// check are computed from.
type Estimator struct {
	// Model is the model the workers ask, and Price its price per call
	// (nil: unpriced), the same Pricer the workers charge the callers'
	// spend with.
	Model string
	Price llm.Pricer
	// ModelConcurrency and ModelRatePerMinute are the bounds of one worker
	// process (LLM_MAX_CONCURRENCY, LLM_RATE_PER_MINUTE, or the account's
	// when those are not set); a rate of 0 is none.
	ModelConcurrency   int
	ModelRatePerMinute int
	// DefaultCallSeconds is a model call's time before any call was
	// measured; SearchSeconds the search's share of a fresh domain (the
	// measured latency is the model's), added to either.
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
	return Estimator{ModelConcurrency: llm.DefaultMaxConcurrency,
		DefaultCallSeconds: DefaultCallSeconds, Freshness: classifier.DefaultFreshness()}
}

// WithDefaults is l with DefaultEstimator's values for its zero fields:
// the model bounds (both, when either is unset), the time of a call and
// the cache policy.
func (l Estimator) WithDefaults() Estimator {
	def := DefaultEstimator()
	if l.ModelConcurrency <= 0 {
		l.ModelConcurrency = def.ModelConcurrency
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
	basis = l.basis(stats, load)
	// The fresh domains' rows, their duplicates by the fresh share; the
	// rest are answered as sets first.
	fresh, domains := float64(est.LLM), float64(est.Domains)
	freshRows := fresh
	if domains > 0 {
		freshRows += float64(est.Duplicates) * fresh / domains
	}
	knownRows := float64(est.Domains+est.Duplicates) - freshRows
	modelWork, rowWork := fresh, freshRows
	for _, o := range load.Others {
		modelWork += math.Min(o.ModelRows, fresh)
		rowWork += math.Min(o.Rows, freshRows)
		basis.ListsSharing++
	}
	setSeconds := knownRows / basis.RowsPerSecond
	modelSeconds, rowSeconds := modelWork/basis.ModelAnswersPerSecond, rowWork*freshRowCPUSeconds/float64(l.cores())
	if setSeconds+rowSeconds > modelSeconds {
		basis.Bound = wire.BoundRows
	}
	basis.Summary = l.summary(basis)
	seconds := math.Round((setSeconds+math.Max(modelSeconds, rowSeconds))*10) / 10
	standard.EstimatedSeconds, economy.EstimatedSeconds = seconds, batchWindowSeconds
	if est.LLM == 0 {
		economy.EstimatedSeconds = seconds
	}
	basis.ModelAnswersPerSecond = math.Round(basis.ModelAnswersPerSecond*100) / 100
	basis.RowsPerSecond = math.Round(basis.RowsPerSecond*100) / 100
	for _, t := range []struct {
		into *wire.TierEstimate
		tier string
	}{{&standard, classifier.TierStandard}, {&economy, classifier.TierEconomy}} {
		if perCallUSD, ok := l.perCallUSD(stats, t.tier); ok {
			cost := RoundUSD(perCallUSD * float64(est.LLM)) // to the micro-dollar: a small list costs fractions of a cent
			t.into.EstimatedCostUSD = &cost
		}
	}
	return standard, economy, basis
}

// perCallUSD is what one model call costs in tier, by the price table, as
// the dry run and the budget check at upload price it: the mean tokens of
// the recent calls stats measured (the defaults before any). ok is false
// for a model the table does not list.
func (l Estimator) perCallUSD(stats db.ModelStats, tier string) (usd float64, ok bool) {
	return l.Price.CallCost(l.Model, llm.MeanTokens(stats.Samples, stats.PromptTokens, stats.CompletionTokens), tier)
}

// basis is the model answers a second (measured, or from the configured
// bounds, and which of them binds) and the rows a second (measured, or
// from the CPU a row costs).
func (l Estimator) basis(stats db.ModelStats, load db.Load) wire.EstimateBasis {
	b := wire.EstimateBasis{CallsSampled: stats.Samples}
	perCall := l.DefaultCallSeconds + l.SearchSeconds
	if stats.Samples > 0 {
		perCall = stats.MedianLatency.Seconds() + l.SearchSeconds
	}
	b.SecondsPerCall = math.Round(perCall*100) / 100
	// Little's law: C calls in flight of perCall seconds each make
	// C/perCall a second, unless the rate limit allows fewer.
	byConcurrency := float64(l.ModelConcurrency) / math.Max(perCall, 0.001)
	byRate := math.Inf(1)
	if l.ModelRatePerMinute > 0 {
		byRate = float64(l.ModelRatePerMinute) / 60
	}
	switch {
	case load.BusySeconds >= measuredMinBusy && load.ModelAnswers >= measuredMinAnswers:
		b.ModelAnswersPerSecond, b.Measured, b.Bound = float64(load.ModelAnswers)/load.BusySeconds, true, wire.BoundMeasured
	case byRate < byConcurrency:
		b.ModelAnswersPerSecond, b.Bound = byRate, wire.BoundRate
	default:
		b.ModelAnswersPerSecond, b.Bound = byConcurrency, wire.BoundConcurrency
	}
	b.ModelAnswersPerSecond = math.Max(b.ModelAnswersPerSecond, 1e-3)
	if load.RowsAnswered >= rowsMinMeasured && load.RowsSeconds > 0 {
		b.RowsPerSecond, b.RowsMeasured = float64(load.RowsAnswered)/load.RowsSeconds, true
	} else {
		b.RowsPerSecond = float64(l.cores()) / setRowCPUSeconds
	}
	return b
}

func (l Estimator) cores() int {
	if l.Cores > 0 {
		return l.Cores
	}
	return runtime.NumCPU()
}

// summary says in a sentence what bounds a list's time, and what would
// raise it: the human text of the estimate, which the CLI prints.
func (l Estimator) summary(b wire.EstimateBasis) string {
	var s string
	assumed := ""
	if !b.Measured && b.CallsSampled == 0 {
		assumed = fmt.Sprintf(" (no model call measured yet; assuming %s s a call)", seconds(b.SecondsPerCall))
	}
	switch b.Bound {
	case wire.BoundMeasured:
		s = fmt.Sprintf("The model: this deployment answered %s fresh domains a second while lists ran in the last %s.",
			seconds(b.ModelAnswersPerSecond), roughly(throughputWindow))
	case wire.BoundRate:
		s = fmt.Sprintf("LLM_RATE_PER_MINUTE=%d bounds the model: %s fresh domains a second for one worker process, where "+
			"LLM_MAX_CONCURRENCY=%d calls in flight of %s s would make %s%s; raise LLM_RATE_PER_MINUTE (and LLM_ACCOUNT_RPM, "+
			"the provider account's, when set) to go faster.", l.ModelRatePerMinute, seconds(b.ModelAnswersPerSecond),
			l.ModelConcurrency, seconds(b.SecondsPerCall), seconds(float64(l.ModelConcurrency)/math.Max(b.SecondsPerCall, 0.001)), assumed)
	case wire.BoundConcurrency:
		s = fmt.Sprintf("LLM_MAX_CONCURRENCY=%d bounds the model: calls in flight of %s s each make %s fresh domains a "+
			"second for one worker process%s; raise LLM_MAX_CONCURRENCY, or run more worker processes, to go faster.",
			l.ModelConcurrency, seconds(b.SecondsPerCall), seconds(b.ModelAnswersPerSecond), assumed)
	case wire.BoundRows:
		how := fmt.Sprintf("at about %s µs of CPU a row on %d cores (no list answered without the model recently to measure)",
			seconds(setRowCPUSeconds*1e6), l.cores())
		if b.RowsMeasured {
			how = "as the lists of the last day answered without the model did"
		}
		s = fmt.Sprintf("The rows bound it, not the model: rows answered by overrides and the cache go at %s a second, %s, "+
			"and each fresh domain's rows at about %s ms of CPU a row.", seconds(b.RowsPerSecond), how, seconds(freshRowCPUSeconds*1000))
	}
	switch {
	case b.ListsSharing == 1:
		s += " Shared evenly with 1 other list not yet ended."
	case b.ListsSharing > 1:
		s += fmt.Sprintf(" Shared evenly with %d other lists not yet ended.", b.ListsSharing)
	}
	return s
}

// seconds is v with at most two decimals, as people write it: 1, 0.25, 4.8.
func seconds(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// RoundUSD rounds to the micro-dollar, as the estimate does: a small list
// costs fractions of a cent.
func RoundUSD(usd float64) float64 { return math.Round(usd*1e6) / 1e6 }

// modelStatsSample is how many recent model answers the estimate reads.
const modelStatsSample = 1000

// batchWindowSeconds is the economy tier's bound: the provider's 24-hour
// completion window (most batches end within hours).
const batchWindowSeconds = 24 * 60 * 60

// roughly is a window as people say it: 15 minutes.
func roughly(d time.Duration) string {
	return fmt.Sprintf("%d minutes", int(d.Minutes()))
}
