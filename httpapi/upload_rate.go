package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// rateReader reads an upload's body as it arrives and ends it with a 408
// problem when a window of the upload brings fewer than minRate bytes a
// second, or when the whole takes longer than listTimeout. It sets the
// connection's read deadline to the moment the upload would fall short if
// nothing more came, so that a caller that sends nothing at all is ended
// too, not only one that sends a byte now and then. (The server's own
// ReadTimeout is for 64 KiB requests; an upload's pace is this one.)
type rateReader struct {
	r       io.Reader
	rc      *http.ResponseController // nil: no deadlines (the checks still run at each read)
	min     int64                    // bytes each window must bring
	minRate int64
	window  time.Duration
	end     time.Time // the whole upload's deadline

	start    time.Time // of the current window
	n        int64     // bytes in the current window
	deadline time.Time // the read deadline set
	total    int64
}

func newRateReader(r io.Reader, rc *http.ResponseController, minRate int64, window time.Duration) *rateReader {
	now := time.Now()
	t := &rateReader{r: r, rc: rc, minRate: minRate, min: int64(float64(minRate) * window.Seconds()), window: window,
		end: now.Add(listTimeout), start: now}
	t.setDeadline()
	return t
}

func (t *rateReader) Read(p []byte) (int, error) {
	if err := t.advance(time.Now()); err != nil {
		return 0, err
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	t.total += int64(n)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		now := time.Now()
		if aerr := t.advance(now); aerr != nil {
			return n, aerr
		}
		return n, t.tooSlow(now) // the deadline came a hair early
	}
	switch {
	case err == nil:
		t.setDeadline()
	case err == io.EOF && t.rc != nil:
		// The whole body is in. net/http now reads on in the background to
		// see the caller hang up, and a deadline passing there would cancel
		// the request while its rows are stored: the upload's own end
		// bounds it instead.
		t.deadline = t.end
		_ = t.rc.SetReadDeadline(t.end)
	}
	return n, err
}

// advance closes the windows that ended by now, or returns the 408 of one
// that fell short.
func (t *rateReader) advance(now time.Time) error {
	if now.After(t.end) {
		return &problem{status: http.StatusRequestTimeout, slug: "upload-too-slow",
			detail: fmt.Sprintf("The upload took longer than %s (%d bytes came); send it faster, or split it.", listTimeout, t.total)}
	}
	for now.Sub(t.start) >= t.window {
		if t.n < t.min {
			return t.tooSlow(now)
		}
		t.start, t.n = t.start.Add(t.window), 0
	}
	return nil
}

func (t *rateReader) tooSlow(now time.Time) error {
	return &problem{status: http.StatusRequestTimeout, slug: "upload-too-slow",
		detail: fmt.Sprintf("The upload is too slow: %d bytes in the last %s; the minimum is %d bytes a second over %s. "+
			"Send the list from where it is read faster, or compressed (Content-Encoding: gzip).",
			t.n, t.window, t.minRate, t.window)}
}

// setDeadline sets the read deadline to when the upload falls short if
// nothing more comes: the current window's end while it lacks bytes, the
// next one's once it has them.
func (t *rateReader) setDeadline() {
	d := t.start.Add(t.window)
	if t.n >= t.min {
		d = d.Add(t.window)
	}
	if d.After(t.end) {
		d = t.end
	}
	if t.rc == nil || d.Equal(t.deadline) {
		return
	}
	t.deadline = d
	_ = t.rc.SetReadDeadline(d)
}
