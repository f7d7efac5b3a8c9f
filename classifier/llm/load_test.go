package llm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job of ten calls a second, each job's calls in flight for 300 ms, is
// three calls in flight on average (Little's law). Read four times a
// second, as a lease renews, the demand stays near three whether a read
// falls inside a job or between two, instead of jumping between ten and
// nothing with every job.
func TestMeanLoad_SteadyJobsAreASteadyDemand(t *testing.T) {
	m := meanLoad{window: interactiveWindow}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var reads []float64
	for sec := 0; sec < 20; sec++ {
		base := sec * 1000
		m.set(at(base), 10)
		m.set(at(base+300), 0)
		for _, r := range []int{100, 350, 600, 850} { // renewals, one inside the job
			reads = append(reads, m.read(at(base+r)))
		}
	}
	for _, v := range reads[len(reads)-20:] { // after 15 s: the mean has settled
		require.InDelta(t, 3.0, v, 0.75, "reads %v", reads[len(reads)-20:])
	}

	// When the jobs stop, the demand is given back within a few windows.
	end := at(20_000)
	var last float64
	for k := 1; k <= 40; k++ {
		last = m.read(end.Add(time.Duration(k) * 250 * time.Millisecond))
	}
	require.Less(t, last, 0.05, "10 s after the last job")
}
