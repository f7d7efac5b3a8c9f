package listfile

import (
	"errors"
	"runtime"
	"sync"

	"github.com/domainclass/domainclass/classifier"
)

// A list's rows are read ahead in batches, and each batch is
// normalized on another core while the rows before it are deduplicated
// and spooled: normalizing is half of an upload's CPU, and the spool, which
// keeps the upload from holding a connection while it arrives, made
// reading and COPY run one after the other instead of side by side.
const (
	// batchRows and batchBytes end a batch: a few hundred rows amortize the
	// hand-over, and the bytes bound what rows in flight hold (their
	// inputs and refs as read, before they are cut).
	batchRows  = 256
	batchBytes = 256 << 10
	// readAhead is how many batches are read before the oldest is taken:
	// enough to keep every core busy, (readAhead+1) × batchBytes at most.
	readAhead = 4
)

// rawRow is a row as read (input, ref, and the reason it cannot be read,
// if any), then as normalized (domain, or the reason it is none; input and
// ref cut to what is stored).
type rawRow struct{ input, ref, domain, reason string }

func (w *rawRow) normalize() {
	if w.reason == "" {
		d, err := classifier.NormalizeDomain(w.input)
		var domErr *classifier.DomainError
		switch {
		case errors.As(err, &domErr):
			w.reason = domErr.Reason
		case err != nil:
			w.reason = err.Error()
		default:
			w.domain = d
		}
	}
	w.input, w.ref = Clip(w.input), Clip(w.ref)
}

type rowBatch struct {
	rows  []rawRow
	bytes int
	done  chan struct{} // closed once normalized
}

// rowBatches hands a Reader its rows, normalized, in order.
type rowBatches struct {
	work    chan *rowBatch
	workers sync.WaitGroup
	pending []*rowBatch
	cur     *rowBatch
	pos     int
	eof     bool
}

// next returns the next row of r, or false when there is none (r's
// reading ended: at the end of the body, or on readErr).
func (b *rowBatches) next(r *Reader) (*rawRow, bool) {
	for b.cur == nil || b.pos >= len(b.cur.rows) {
		if !b.advance(r) {
			return nil, false
		}
	}
	b.pos++
	return &b.cur.rows[b.pos-1], true
}

// advance reads batches until readAhead are in flight (or the body
// ends), then takes the oldest once it is normalized.
func (b *rowBatches) advance(r *Reader) bool {
	if b.work == nil {
		b.work = make(chan *rowBatch, readAhead)
		for range max(1, runtime.GOMAXPROCS(0)) {
			b.workers.Go(func() {
				for batch := range b.work {
					for i := range batch.rows {
						batch.rows[i].normalize()
					}
					close(batch.done)
				}
			})
		}
	}
	for len(b.pending) < readAhead && !b.eof {
		batch := &rowBatch{done: make(chan struct{})}
		for len(batch.rows) < batchRows && batch.bytes < batchBytes {
			input, ref, reason, ok := r.read()
			if !ok {
				b.eof = true
				break
			}
			r.readRows++
			batch.rows = append(batch.rows, rawRow{input: input, ref: ref, reason: reason})
			batch.bytes += len(input) + len(ref)
		}
		if len(batch.rows) > 0 {
			b.pending = append(b.pending, batch)
			b.work <- batch // never blocks: at most readAhead batches are pending
		}
	}
	if len(b.pending) == 0 {
		return false
	}
	b.cur, b.pending, b.pos = b.pending[0], b.pending[1:], 0
	<-b.cur.done
	return true
}

// close stops the workers, once they have finished the batches in flight.
func (b *rowBatches) close() {
	if b.work != nil {
		close(b.work)
		b.workers.Wait()
		b.work = nil
	}
}
