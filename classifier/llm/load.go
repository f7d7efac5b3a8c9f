package llm

import (
	"math"
	"time"
)

// interactiveWindow is how long the interactive demand a lease reports
// remembers: the time constant of its moving mean. A lease renews every
// 250 ms, while a 10-domain job's calls arrive and end within a few hundred
// milliseconds. Leasing for the calls waiting at the instant of a renewal
// moved the account back and forth between processes with every job, and
// what one process gave up sat unused until the others' next renewal: 7%
// of the account with two processes and 13% with four (bench "fair", the
// jobs + list step). Over two seconds the mean of a job a second is steady,
// so the share a process holds for its jobs stays put and its own lists use
// it between them; a process whose jobs stop gives it back within seconds.
const interactiveWindow = 2 * time.Second

// meanLoad is the moving mean of a count of calls (in flight and waiting)
// over time: by Little's law, the calls the account must keep in flight
// for them, however they arrive.
type meanLoad struct {
	window time.Duration
	n      int       // the count now
	at     time.Time // when it last changed
	area   float64   // call-seconds since the last read
	from   time.Time // the last read
	mean   float64
}

// set records that the count is n from now on.
func (m *meanLoad) set(now time.Time, n int) {
	m.advance(now)
	m.n = n
}

func (m *meanLoad) advance(now time.Time) {
	if !m.at.IsZero() && now.After(m.at) {
		m.area += float64(m.n) * now.Sub(m.at).Seconds()
	}
	m.at = now
}

// read returns the moving mean at now: the mean count since the last read,
// weighed against the older mean by how long that was.
func (m *meanLoad) read(now time.Time) float64 {
	m.advance(now)
	if dt := now.Sub(m.from).Seconds(); !m.from.IsZero() && dt > 0 {
		keep := math.Exp(-dt / m.window.Seconds())
		m.mean = keep*m.mean + (1-keep)*m.area/dt
	}
	m.area, m.from = 0, now
	return m.mean
}
