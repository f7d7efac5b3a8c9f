package listfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// Options are a Reader's: its limit and, for a CSV, its columns.
type Options struct {
	// MaxRows refuses a list of more rows (CodeTooLarge); 0: no limit.
	MaxRows int
	// Columns name a CSV's domain and ref columns.
	Columns Columns
}

// Reader reads a list's rows in order, normalizes each, and finds
// duplicates: it is a db.ListRowSource, and counts what an upload's answer
// reports (Counts). Memory grows with the distinct domains only,
// about 30 bytes each (a 128-bit hash and a row number: no pointers for the
// garbage collector to scan), never with the body.
type Reader struct {
	format  Format
	body    io.Reader
	maxRows int

	columns   Columns
	csv       *csvReader
	domainCol int
	refCol    int
	lines     *bufio.Reader

	batches  rowBatches
	readRows int   // rows read, ahead of rows (those Next has passed)
	readErr  error // why reading stopped before the body's end

	cur db.ListRowIn
	err error

	seen   map[domainKey]int32
	seeds  [2]maphash.Seed
	counts Counts
}

// Counts are what a Reader has read so far.
type Counts struct {
	Rows       int
	Domains    int // distinct
	Duplicates int // rows with the domain of an earlier row
	Rejected   int // rows that are no domain
	// Sample is the first wire.MaxRejectedSample rejected rows.
	Sample []wire.RejectedRow
}

// domainKey identifies a domain by two independent 64-bit hashes of it,
// with seeds of this process: two domains share a key with a probability
// of about 2^-128 per pair (1.5e-27 for a million domains), and no caller
// can aim for it.
type domainKey [2]uint64

// NewReader reads body, written in format, within o. Close it once done.
func NewReader(format Format, body io.Reader, o Options) *Reader {
	return &Reader{format: format, body: body, maxRows: o.MaxRows, columns: o.Columns, seen: map[domainKey]int32{},
		domainCol: -1, refCol: -1, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// Next reads the next row. It returns false at the end of the body, or on
// an error that refuses the whole list (Err): an unreadable body, a CSV
// without a domain column, a limit crossed.
func (r *Reader) Next() bool {
	if r.err != nil {
		return false
	}
	raw, ok := r.batches.next(r)
	if !ok {
		r.err = r.readErr
		return false
	}
	c := &r.counts
	c.Rows++
	if r.maxRows > 0 && c.Rows > r.maxRows {
		r.err = &Error{Code: CodeTooLarge, Detail: fmt.Sprintf("The list has more than %d rows; split it.", r.maxRows)}
		return false
	}
	r.cur = db.ListRowIn{Row: c.Rows, Input: raw.input, Ref: raw.ref, Domain: raw.domain, Reason: raw.reason}
	if raw.reason != "" {
		c.Rejected++
		if len(c.Sample) < wire.MaxRejectedSample {
			c.Sample = append(c.Sample, wire.RejectedRow{Row: c.Rows, Input: r.cur.Input, Reason: raw.reason})
		}
		return true
	}
	key := domainKey{maphash.String(r.seeds[0], r.cur.Domain), maphash.String(r.seeds[1], r.cur.Domain)}
	if first, ok := r.seen[key]; ok {
		r.cur.FirstRow = int(first)
		c.Duplicates++
		return true
	}
	r.seen[key] = int32(c.Rows)
	c.Domains++
	return true
}

// Close stops the reader's workers; call it once done with the reader.
func (r *Reader) Close() { r.batches.close() }

// Row is the row Next read.
func (r *Reader) Row() db.ListRowIn { return r.cur }

// Err is why Next stopped early, or nil at the end of the body: an
// *Error (wrapping the body's own error when the body stopped it).
func (r *Reader) Err() error { return r.err }

// Counts are the rows read so far, their domains, duplicates and rejects.
func (r *Reader) Counts() Counts { return r.counts }

// read returns the next row's input and ref, or why the row cannot be read
// (the row is then rejected with that reason); ok is false at the end.
func (r *Reader) read() (input, ref, reason string, ok bool) {
	switch r.format {
	case CSV:
		return r.readCSV()
	case NDJSON:
		for {
			line, ok := r.readLine()
			if !ok {
				return "", "", "", false
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var obj struct {
				Domain *string          `json:"domain"`
				Ref    *json.RawMessage `json:"ref"`
			}
			if err := json.Unmarshal(line, &obj); err != nil || obj.Domain == nil {
				return string(line), "", `not a JSON object with a "domain" string`, true
			}
			return *obj.Domain, refText(obj.Ref), "", true
		}
	default:
		for {
			line, ok := r.readLine()
			if !ok {
				return "", "", "", false
			}
			text := strings.TrimSpace(string(line))
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			return text, "", "", true
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// maxLineBytes comes back cut (and is rejected as no domain).
func (r *Reader) readLine() ([]byte, bool) {
	if r.lines == nil {
		r.lines = bufio.NewReaderSize(r.body, 64<<10)
	}
	var long []byte
	for {
		line, err := r.lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxLineBytes {
				long = append(long, line...)
			}
			continue
		}
		if long != nil {
			line = append(long, line...)
		}
		if err != nil && err != io.EOF {
			r.readErr = r.readError(err, "")
			return nil, false
		}
		if len(line) == 0 && err == io.EOF {
			return nil, false
		}
		return bytes.TrimRight(line, "\r\n"), true
	}
}

// readError is the error of a body that stopped being readable; empty is
// the detail for an empty body. The body's own error is kept (Unwrap):
// the server's body says why in its own terms (too slow, too large).
func (r *Reader) readError(err error, empty string) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case err == io.EOF && empty != "":
		return &Error{Code: CodeUnreadable, Detail: empty}
	}
	return &Error{Code: CodeUnreadable, Detail: fmt.Sprintf("The body could not be read: %v.", err), Err: err}
}

// refText is a ref as sent: a JSON string's text, or any other JSON value
// as written ({"ref": 42} keeps "42").
func refText(raw *json.RawMessage) string {
	if raw == nil {
		return ""
	}
	var s string
	if json.Unmarshal(*raw, &s) == nil {
		return s
	}
	if string(*raw) == "null" {
		return ""
	}
	return string(*raw)
}

// Clip makes s storable and short: bytes that are not UTF-8 and control
// characters become U+FFFD (Postgres refuses both a NUL and broken UTF-8 in
// text, which would fail the whole upload), and it is cut to MaxInputBytes,
// on a rune boundary.
func Clip(s string) string {
	if len(s) <= MaxInputBytes && printableASCII(s) {
		return s // most rows: nothing to replace, nothing to cut
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= MaxInputBytes {
		return s
	}
	s = s[:MaxInputBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// printableASCII reports whether s is ASCII without control characters.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}
