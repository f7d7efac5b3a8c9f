package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// listFormat is how a list body is written, by its Content-Type.
type listFormat string

const (
	formatCSV    listFormat = "text/csv"             // a header row with a domain column, optional ref
	formatNDJSON listFormat = "application/x-ndjson" // {"domain": "...", "ref": "..."} per line
	formatText   listFormat = "text/plain"           // a domain per line; blank and # lines skipped
)

// listFormatOf reads the Content-Type of an upload, or returns a 415
// problem.
func listFormatOf(contentType string) (listFormat, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil {
		switch f := listFormat(strings.ToLower(mt)); f {
		case formatCSV, formatNDJSON, formatText:
			return f, nil
		}
	}
	return "", &problem{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
		detail: fmt.Sprintf("Send the list as text/csv (with a domain column), application/x-ndjson or text/plain, not %q.", contentType)}
}

// maxInputBytes caps what a row keeps of its input (and ref): anything
// longer is no domain, and the answer only needs to say which row it was.
const maxInputBytes = 512

// maxLineBytes caps an NDJSON or text line.
const maxLineBytes = 64 << 10

// maxGzipRatio is how many times its compressed size a gzip body may
// decompress to, once past gzipRatioGrace. CRM exports compress 4–6 times
// (measured on 200k-row exports: five columns, 4.6 at gzip -1 to 6.1 at
// -9; forty columns, mostly empty, 4.3 to 5.4), so 100 leaves them 16
// times the room; a million copies of one domain compress 500 times, and
// one repeated byte, the cheapest bomb, 1,000. A bomb is now refused
// within its first megabyte or two of output, instead of after
// LIST_MAX_BYTES of it (1 MB of gzip made of 1 GiB of newlines took 12 s
// and 5 CPU-seconds to refuse).
const maxGzipRatio = 100

// gzipRatioGrace is the output below which the ratio is not checked: a
// small list of one domain repeated compresses far beyond maxGzipRatio
// and costs nothing.
const gzipRatioGrace = 1 << 20

// listBody is an upload's body: read at no less than the minimum rate,
// decompressed when it is gzip, cut off with a 413 problem beyond max
// bytes (counted after decompression) or beyond maxGzipRatio, and, with an
// Idempotency-Key, hashed as it is read.
type listBody struct {
	r    io.Reader
	n    int64
	max  int64
	gzip bool
	hash hash.Hash // nil: not hashed
	raw  *countingReader
	req  *http.Request
}

// openListBody opens an upload's body, read within the rate and limits of
// l; rc sets the connection's read deadline (nil: none). The body it
// returns, even with an error, must be finished once the answer is
// written.
func openListBody(r *http.Request, rc *http.ResponseController, l ListLimits, hashed bool) (*listBody, error) {
	raw := &countingReader{r: newRateReader(r.Body, rc, l.UploadMinRate, l.UploadRateWindow)}
	b := &listBody{max: l.MaxBytes, raw: raw, req: r}
	in := http.MaxBytesReader(nil, io.NopCloser(raw), l.MaxBytes)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		b.r = in
	case "gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			var p *problem
			if errors.As(err, &p) {
				return b, p // too slow before the gzip header was in
			}
			return b, &problem{status: http.StatusBadRequest, slug: "unreadable-list", detail: "The body is not valid gzip."}
		}
		b.r, b.gzip = zr, true
	default:
		return b, &problem{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
			detail: fmt.Sprintf("Content-Encoding %q is not supported; send gzip, or no encoding.", enc)}
	}
	if hashed {
		b.hash = sha256.New()
	}
	return b, nil
}

func (b *listBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.hash != nil {
		b.hash.Write(p[:n])
	}
	if b.n > b.max {
		return n, b.tooLarge()
	}
	if b.gzip && b.n > gzipRatioGrace && b.n > maxGzipRatio*b.raw.n {
		return n, &problem{status: http.StatusRequestEntityTooLarge, slug: "list-too-large",
			detail: fmt.Sprintf("The body decompresses to more than %d times its compressed size, which no export does "+
				"(a gzip bomb?); send it uncompressed, or split it.", maxGzipRatio)}
	}
	var (
		mbe  *http.MaxBytesError
		prob *problem
	)
	switch {
	case errors.As(err, &prob):
		return n, prob
	case errors.As(err, &mbe):
		return n, b.tooLarge()
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader):
		return n, &problem{status: http.StatusBadRequest, slug: "unreadable-list", detail: "The body is not valid gzip."}
	case err != nil && err != io.EOF:
		return n, &problem{status: http.StatusBadRequest, slug: "unreadable-list",
			detail: fmt.Sprintf("The body could not be read: %v.", err)}
	}
	return n, err
}

// finish runs once the handler has answered. When it refused the list
// while the caller was still sending (over the limit, unreadable, a key
// reused), the answer is flushed and the rest of the body read and dropped
// for up to refusedDrain. net/http closes a connection whose body is
// unread at once when the request carried Expect: 100-continue (as the CLI's
// and curl's uploads do), and the kernel then answers the bytes still
// arriving with a reset: a client still writing gets "connection reset by
// peer" instead of the answer, and retries the whole upload.
func (b *listBody) finish(c *gin.Context) {
	if c.Writer.Status() < http.StatusBadRequest || b.raw.n == 0 {
		return // accepted (the body was read to its end), or refused before a byte was asked for
	}
	c.Writer.Flush()
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(refusedDrain))
	_, _ = io.Copy(io.Discard, b.req.Body)
}

// refusedDrain bounds the reading of a refused upload's rest: long enough
// for the client to read the answer, short enough that a refused gigabyte
// costs a handler a second.
const refusedDrain = time.Second

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (b *listBody) tooLarge() error {
	return &problem{status: http.StatusRequestEntityTooLarge, slug: "list-too-large",
		detail: fmt.Sprintf("The list is larger than %d bytes (after decompression); split it.", b.max)}
}

// listReader reads an upload's rows in order, normalizes each, and finds
// duplicates: it is the db.ListRowSource that COPY writes from, and counts
// what the answer reports. Memory grows with the distinct domains only,
// about 30 bytes each (a 128-bit hash and a row number: no pointers for the
// garbage collector to scan), never with the body.
type listReader struct {
	format  listFormat
	body    io.Reader
	maxRows int

	columns   csvColumns
	csv       *csvReader
	domainCol int
	refCol    int
	lines     *bufio.Reader

	batches  rowBatches
	readRows int   // rows read, ahead of rows (those Next has passed)
	readErr  error // why reading stopped before the body's end

	cur db.ListRowIn
	err error

	seen       map[domainKey]int32
	seeds      [2]maphash.Seed
	rows       int
	domains    int
	duplicates int
	rejected   int
	sample     []wire.RejectedRow
}

// domainKey identifies a domain by two independent 64-bit hashes of it,
// with seeds of this process: two domains share a key with a probability
// of about 2^-128 per pair (1.5e-27 for a million domains), and no caller
// can aim for it.
type domainKey [2]uint64

func newListReader(format listFormat, body io.Reader, maxRows int, columns csvColumns) *listReader {
	return &listReader{format: format, body: body, maxRows: maxRows, columns: columns, seen: map[domainKey]int32{},
		domainCol: -1, refCol: -1, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// Next reads the next row. It returns false at the end of the body, or on
// an error that refuses the whole list (Err): an unreadable body, a CSV
// without a domain column, a limit crossed.
func (r *listReader) Next() bool {
	if r.err != nil {
		return false
	}
	raw, ok := r.batches.next(r)
	if !ok {
		r.err = r.readErr
		return false
	}
	r.rows++
	if r.rows > r.maxRows {
		r.err = &problem{status: http.StatusRequestEntityTooLarge, slug: "list-too-large",
			detail: fmt.Sprintf("The list has more than %d rows; split it.", r.maxRows)}
		return false
	}
	r.cur = db.ListRowIn{Row: r.rows, Input: raw.input, Ref: raw.ref, Domain: raw.domain, Reason: raw.reason}
	if raw.reason != "" {
		r.rejected++
		if len(r.sample) < wire.MaxRejectedSample {
			r.sample = append(r.sample, wire.RejectedRow{Row: r.rows, Input: r.cur.Input, Reason: raw.reason})
		}
		return true
	}
	key := domainKey{maphash.String(r.seeds[0], r.cur.Domain), maphash.String(r.seeds[1], r.cur.Domain)}
	if first, ok := r.seen[key]; ok {
		r.cur.FirstRow = int(first)
		r.duplicates++
		return true
	}
	r.seen[key] = int32(r.rows)
	r.domains++
	return true
}

// Close stops the reader's workers; call it once done with the reader.
func (r *listReader) Close() { r.batches.close() }

// Row is the row Next read.
func (r *listReader) Row() db.ListRowIn { return r.cur }

// Err is why Next stopped early, or nil at the end of the body.
func (r *listReader) Err() error { return r.err }

// read returns the next row's input and ref, or why the row cannot be read
// (the row is then rejected with that reason); ok is false at the end.
func (r *listReader) read() (input, ref, reason string, ok bool) {
	switch r.format {
	case formatCSV:
		return r.readCSV()
	case formatNDJSON:
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
func (r *listReader) readLine() ([]byte, bool) {
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

// readError is the problem of a body that stopped being readable; empty is
// the detail for an empty body.
func (r *listReader) readError(err error, empty string) error {
	var p *problem
	switch {
	case errors.As(err, &p):
		return p
	case err == io.EOF && empty != "":
		return &problem{status: http.StatusBadRequest, slug: "unreadable-list", detail: empty}
	}
	return &problem{status: http.StatusBadRequest, slug: "unreadable-list", detail: fmt.Sprintf("The body could not be read: %v.", err)}
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

// clip makes s storable and short: bytes that are not UTF-8 and control
// characters become U+FFFD (Postgres refuses both a NUL and broken UTF-8 in
// text, which would fail the whole upload), and it is cut to maxInputBytes,
// on a rune boundary.
func clip(s string) string {
	if len(s) <= maxInputBytes && printableASCII(s) {
		return s // most rows: nothing to replace, nothing to cut
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= maxInputBytes {
		return s
	}
	s = s[:maxInputBytes]
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
