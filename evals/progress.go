package evals

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress shows how far a run is: a bar on a terminal, plain lines (every
// 10%) anywhere else, such as a CI log. Add is safe from several goroutines.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar
	total int
	done  int
	next  int // plain mode: print when done reaches this
	start time.Time
}

// NewProgress returns a progress display for total answers on w.
func NewProgress(w io.Writer, total int, terminal bool) *Progress {
	p := &Progress{w: w, total: total, start: time.Now()}
	if terminal {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("eval"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("answers"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
		return p
	}
	fmt.Fprintf(w, "eval: %d answers to get\n", total)
	p.next = max(total/10, 1)
	return p
}

// Add records one finished answer.
func (p *Progress) Add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	if p.done >= p.next || p.done == p.total {
		fmt.Fprintf(p.w, "eval: %d/%d answers (%d%%) in %s\n", p.done, p.total, p.done*100/max(p.total, 1),
			time.Since(p.start).Round(100*time.Millisecond))
		p.next = p.done + max(p.total/10, 1)
	}
}
