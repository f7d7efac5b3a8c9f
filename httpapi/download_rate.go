package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// rateWriter writes a download to its client at no less than a minimum
// rate: in pieces of at most minRate × window bytes, each with a write
// deadline one window away (and none past the download's end, listTimeout
// after it began). A client that takes fewer bytes than that in a window,
// one that stopped reading or reads a few bytes now and then, is cut off
// when the deadline passes, once the sockets' buffers are full: it sees
// the download break. (The server's own WriteTimeout is for short
// answers; a download's pace is this one, as an upload's is rateReader's.)
type rateWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	minRate int64
	window  time.Duration
	piece   int
	end     time.Time

	total  int64 // bytes written
	failed bool  // a write failed: the client is gone, or too slow
}

func newRateWriter(w io.Writer, rc *http.ResponseController, minRate int64, window time.Duration) *rateWriter {
	piece := int(min(float64(minRate)*window.Seconds(), 1<<30))
	return &rateWriter{w: w, rc: rc, minRate: minRate, window: window, piece: max(piece, 1),
		end: time.Now().Add(listTimeout)}
}

// page writes p to the client and flushes it, or returns the error of the
// write that failed.
func (w *rateWriter) page(p []byte) error {
	for len(p) > 0 {
		k := min(len(p), w.piece)
		w.setDeadline()
		n, err := w.w.Write(p[:k])
		w.total += int64(n)
		if err != nil {
			w.failed = true
			return err
		}
		p = p[k:]
	}
	w.setDeadline()
	if err := w.rc.Flush(); err != nil {
		w.failed = true
		return err
	}
	return nil
}

// finish gives what the server writes after the handler (the last chunk) a
// window of its own.
func (w *rateWriter) finish() { w.setDeadline() }

func (w *rateWriter) setDeadline() {
	d := time.Now().Add(w.window)
	if d.After(w.end) {
		d = w.end
	}
	_ = w.rc.SetWriteDeadline(d)
}

// tooSlow reports whether err is a write that passed its deadline.
func (w *rateWriter) tooSlow(err error) bool {
	return w.failed && errors.Is(err, os.ErrDeadlineExceeded)
}
