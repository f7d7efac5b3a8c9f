package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/domainclass/domainclass/wire"
)

// progress is the one progress bar of the CLI, for jobs (submit --wait)
// and lists (submit --wait, lists wait, lists retry --wait): how far some
// work is, on one line. On a terminal the
// line is drawn again in place; elsewhere (a log, a pipe) a line is written
// per change. The rate is measured over the last rateWindow of looks, never
// from before the first one, so the first frame has none (a bar that
// started counting from zero showed "1110667996 rows/s" for a list a third
// done). Why the API is being retried shows on the same line, not as lines
// of its own (159 "retrying in 2s" lines broke the bar); elsewhere, once
// when it starts and then at most every noteEvery.
type progress struct {
	w    io.Writer
	tty  bool
	now  func() time.Time
	unit string // what is counted: "rows", "domains"

	mu     sync.Mutex
	looks  []look // recent looks, oldest first, for the rate
	shown  string // the counts last shown (done and extra)
	drawn  string // the line as last written
	note   string // why the API is being retried, "" when it answers
	noteAt time.Time
	noted  time.Time // when a note was last written (not a terminal)
	// changedAt is when done last changed (lastDone): past stallAfter the
	// line says how long nothing moved, and why when the service says.
	changedAt time.Time
	lastDone  int
	stallLine string    // the stalled line as last written (not a terminal)
	stallAt   time.Time // when it was written
}

type look struct {
	at   time.Time
	done int
}

const (
	// rateWindow: the rate is of the last minute, so that it follows an
	// outage and a recovery rather than averaging them away.
	rateWindow = time.Minute
	// noteEvery: an outage of an hour writes a line a minute, not one per
	// retry.
	noteEvery = time.Minute
	// stallAfter: a count still for this long shows no rate and no time
	// left (they would be stale: issue 36 saw "about 3m37s left" stand for
	// ten minutes), but how long nothing moved, and why when the service
	// says; after a stall the rate starts again from its end (not "72h26m
	// left" from a window that holds the stall).
	stallAfter = 30 * time.Second
)

// newProgress counts unit ("rows", "domains") on w.
func newProgress(w io.Writer, unit string) *progress {
	return &progress{w: w, tty: isTerminal(w), now: time.Now, unit: unit}
}

// set shows done of total, with extra after the counts (", 3/4 jobs
// finished"), and the rate and time left while done grows.
func (p *progress) set(done, total int, extra string) { p.setWaiting(done, total, extra, "") }

// setWaiting is set, with what the work waits for (waiting, from the
// service; "" when it does not say) shown once the count has been still
// for stallAfter: on a terminal on the line, elsewhere as a line when the
// stall starts, when its reason changes, and then every noteEvery.
func (p *progress) setWaiting(done, total int, extra, waiting string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.note = ""
	if p.changedAt.IsZero() || done != p.lastDone {
		if !p.changedAt.IsZero() && now.Sub(p.changedAt) >= stallAfter && len(p.looks) > 0 {
			p.looks = p.looks[len(p.looks)-1:] // the rate starts again at the stall's end
		}
		p.changedAt, p.lastDone = now, done
	}
	p.looks = append(p.looks, look{now, done})
	// Keep the newest look at least rateWindow old, as the rate's start.
	for len(p.looks) > 2 && now.Sub(p.looks[1].at) >= rateWindow {
		p.looks = p.looks[1:]
	}
	counts := fmt.Sprintf("progress: %d/%d %s done%s", done, total, p.unit, extra)
	if still := now.Sub(p.changedAt); done < total && still >= stallAfter {
		line := counts + ", no progress for " + roughly(still)
		if waiting != "" {
			line += ": " + waiting
		}
		if !p.tty {
			if waiting+counts == p.stallLine && now.Sub(p.stallAt) < noteEvery {
				return
			}
			p.stallLine, p.stallAt = waiting+counts, now
		}
		p.shown = line
		p.draw(line)
		return
	}
	p.stallLine = ""
	if counts == p.shown && !p.tty {
		return
	}
	p.shown = counts
	line := counts
	first := p.looks[0]
	if elapsed := now.Sub(first.at).Seconds(); elapsed > 0 && done > first.done {
		rate := float64(done-first.done) / elapsed
		switch {
		case rate >= 10:
			line += fmt.Sprintf(", %.0f %s/s", rate, p.unit)
		case rate >= 1:
			line += fmt.Sprintf(", %.1f %s/s", rate, p.unit)
		default:
			line += fmt.Sprintf(", %.2f %s/s", rate, p.unit)
		}
		if done < total {
			line += ", " + about(time.Duration(float64(total-done)/rate*float64(time.Second))) + " left"
		}
	}
	p.draw(line)
}

// jobs is client.Wait's progress callback for jobs of total domains: the
// domains done, and how many of the jobs have ended.
func (p *progress) jobs(total int) func([]*wire.JobReport) {
	return func(reports []*wire.JobReport) {
		done, ended := 0, 0
		for _, r := range reports {
			done += r.Progress.Done
			if r.Ended() {
				ended++
			}
		}
		p.set(done, total, fmt.Sprintf(", %d/%d jobs finished", ended, len(reports)))
	}
}

// list is client.WaitList's progress callback: one poll's status.
func (p *progress) list(s *wire.ListStatus) {
	p.setWaiting(s.Progress.Done, s.Progress.Total, "", s.Waiting)
}

// retrying is the API client's OnRetry while the line is shown: the reason
// joins the line.
func (p *progress) retrying(reason string, _ time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.note == "" {
		p.noteAt = now
	}
	p.note = reason
	if p.tty {
		base, _, _ := strings.Cut(p.drawn, " — ")
		if base == "" {
			base = "progress: waiting"
		}
		p.draw(fmt.Sprintf("%s — API not answering for %s, retrying: %s", base, roughly(now.Sub(p.noteAt)), reason))
		return
	}
	if p.noted.IsZero() || now.Sub(p.noted) >= noteEvery {
		p.noted = now
		since := ""
		if d := now.Sub(p.noteAt); d >= time.Second {
			since = " (for " + roughly(d) + ")"
		}
		fmt.Fprintf(p.w, "retrying%s: %s\n", since, reason)
	}
}

// draw writes line: in place on a terminal (carriage return, the line,
// erase to its end), else as a line of its own.
func (p *progress) draw(line string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.drawn = line
}

// finish ends the line on a terminal, so that what follows starts on a
// line of its own.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn != "" {
		fmt.Fprintln(p.w)
	}
}
