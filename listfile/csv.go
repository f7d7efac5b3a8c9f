package listfile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/domainclass/domainclass/classifier"
)

// The bounds of one CSV record (the header row too).
const (
	// maxRecordBytes caps a CSV record, its newlines included, as
	// maxLineBytes caps a line of the other formats: a CRM export's row is
	// 100–250 bytes. Beyond it the list is refused (CodeRecordTooLarge) naming the row:
	// a record that long is most often a quoted field never closed, which
	// would swallow every row after it.
	maxRecordBytes = maxLineBytes
	// maxCSVFields caps the fields of a record. CRM objects allow on the
	// order of a thousand custom fields (Salesforce 800 in its largest
	// editions, HubSpot about 1,000 properties), so an export of every one
	// of them fits.
	maxCSVFields = 2048
)

var (
	errRecordTooLarge = errors.New("record too large")
	errTooManyFields  = errors.New("too many fields")
	// errUnclosedQuote is a quoted field still open at the end of the
	// body: every line after its opening quote was read into it, so the
	// rows those lines held are not rows at all.
	errUnclosedQuote = errors.New("quoted field never closed")
)

// csvSyntaxError is a record that is not valid CSV; Err is csv.ErrQuote or
// csv.ErrBareQuote, as encoding/csv says.
type csvSyntaxError struct{ Err error }

func (e *csvSyntaxError) Error() string { return e.Err.Error() }

// csvReader reads CSV records as encoding/csv does with FieldsPerRecord
// -1 (RFC 4180: quoted fields may hold commas, doubled quotes and
// newlines; \r\n reads as \n; empty lines are skipped; a stray quote is an
// error), within maxRecordBytes and maxCSVFields, and keeps only the
// fields it is asked for. encoding/csv buffers a whole record and an entry
// for every field: one quoted 250 MiB field took 700 MB, 20 MiB of commas
// 2 GB.
type csvReader struct {
	r *bufio.Reader
	// keep says which fields (by column) Read returns; nil: all of them.
	keep   func(col int) bool
	fields []string
	buf    []byte
	size   int // bytes of the record read so far
	line   int // lines read so far
	start  int // the line the record starts on
}

func newCSVReader(r io.Reader) *csvReader {
	return &csvReader{r: bufio.NewReaderSize(r, maxRecordBytes)}
}

// Read returns the next record's fields: the kept ones as written, the
// others "" (the slice is reused by the next Read). It returns io.EOF at
// the end; a *csvSyntaxError for a record that is not valid CSV, whose
// line is then skipped (as encoding/csv does); errUnclosedQuote for a
// quoted field that the body ends in (c.start is the record's line);
// errRecordTooLarge or errTooManyFields when the record crosses a bound;
// or the body's error.
func (c *csvReader) Read() ([]string, error) {
	c.size, c.fields = 0, c.fields[:0]
	var line []byte
	for {
		var err error
		if line, err = c.readLine(); err != nil {
			return nil, err
		}
		if len(line) != lengthNL(line) {
			c.start = c.line
			break
		}
		c.size = 0 // an empty line, skipped
	}
	for col := 0; ; col++ {
		if len(c.fields) == maxCSVFields {
			return nil, errTooManyFields
		}
		keep := c.keep == nil || c.keep(col)
		var (
			more bool
			err  error
		)
		if len(line) == 0 || line[0] != '"' {
			line, more, err = c.unquoted(line, keep)
		} else {
			line, more, err = c.quoted(line[1:], keep)
		}
		if err != nil || !more {
			return c.fields, err
		}
	}
}

// unquoted reads a field that does not start with a quote; more is false
// at the record's end.
func (c *csvReader) unquoted(line []byte, keep bool) (rest []byte, more bool, err error) {
	i := bytes.IndexByte(line, ',')
	field := line
	if i >= 0 {
		field = field[:i]
	} else {
		field = field[:len(field)-lengthNL(field)]
	}
	if bytes.IndexByte(field, '"') >= 0 {
		return nil, false, &csvSyntaxError{csv.ErrBareQuote}
	}
	c.add(keep, field)
	if i < 0 {
		return nil, false, nil
	}
	return line[i+1:], true, nil
}

// quoted reads a quoted field from after its opening quote, across lines;
// more is false at the record's end.
func (c *csvReader) quoted(line []byte, keep bool) (rest []byte, more bool, err error) {
	c.buf = c.buf[:0]
	for {
		i := bytes.IndexByte(line, '"')
		switch {
		case i >= 0:
			if keep {
				c.buf = append(c.buf, line[:i]...)
			}
			line = line[i+1:]
			switch {
			case len(line) > 0 && line[0] == '"': // "" is a quote
				if keep {
					c.buf = append(c.buf, '"')
				}
				line = line[1:]
			case len(line) > 0 && line[0] == ',':
				c.addBuf(keep)
				return line[1:], true, nil
			case lengthNL(line) == len(line):
				c.addBuf(keep)
				return nil, false, nil
			default:
				return nil, false, &csvSyntaxError{csv.ErrQuote}
			}
		case len(line) > 0: // the field goes on on the next line
			if keep {
				c.buf = append(c.buf, line...)
			}
			if line, err = c.readLine(); err == io.EOF {
				err = nil
			}
			if err != nil {
				return nil, false, err
			}
		default: // the end of the body inside the quotes
			return nil, false, errUnclosedQuote
		}
	}
}

// readLine returns the next line, its \r\n made \n (and a last \r
// dropped), counting it toward the record's bound; an empty line and
// io.EOF at the end.
func (c *csvReader) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	c.size += len(line)
	if len(line) > 0 {
		c.line++
	}
	if errors.Is(err, bufio.ErrBufferFull) || c.size > maxRecordBytes {
		return nil, errRecordTooLarge
	}
	n := len(line)
	if n > 0 && err == io.EOF {
		err = nil
		if line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	if err != nil {
		return nil, err
	}
	if n := len(line); n >= 2 && line[n-2] == '\r' && line[n-1] == '\n' {
		line[n-2] = '\n'
		line = line[:n-1]
	}
	return line, nil
}

func (c *csvReader) add(keep bool, field []byte) {
	if keep {
		c.fields = append(c.fields, string(field))
	} else {
		c.fields = append(c.fields, "")
	}
}

func (c *csvReader) addBuf(keep bool) { c.add(keep, c.buf) }

// lengthNL is 1 when b ends with a newline.
func lengthNL(b []byte) int {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return 1
	}
	return 0
}

// readCSV reads a CSV row: its header first (see readHeader), then its
// domain and ref fields.
func (r *Reader) readCSV() (input, ref, reason string, ok bool) {
	if r.csv == nil && !r.readHeader() {
		return "", "", "", false
	}
	rec, err := r.csv.Read()
	var serr *csvSyntaxError
	switch {
	case err == io.EOF:
		return "", "", "", false
	case errors.As(err, &serr):
		return "", "", "unreadable CSV line: " + serr.Error(), true
	case err != nil:
		r.readErr = r.csvError(err, fmt.Sprintf("Row %d of the CSV", r.readRows+1))
		return "", "", "", false
	}
	if r.refCol >= 0 && r.refCol < len(rec) {
		ref = rec[r.refCol]
	}
	if r.domainCol >= len(rec) {
		return "", ref, classifier.ReasonEmpty, true
	}
	return rec[r.domainCol], ref, "", true
}

// readHeader reads a CSV's header row and finds its domain and ref
// columns, by the names asked for (any case); false, with Err, when it
// cannot.
func (r *Reader) readHeader() bool {
	r.csv = newCSVReader(r.body)
	header, err := r.csv.Read()
	if err != nil {
		if err == io.EOF {
			err = &Error{Code: CodeUnreadable, Detail: "The CSV has no header row; the first line must name a domain column."}
		}
		r.readErr = r.csvError(err, "The CSV's header row")
		return false
	}
	names := make([]string, len(header))
	for i, h := range header {
		names[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if r.domainCol < 0 && strings.EqualFold(names[i], r.columns.domainName()) {
			r.domainCol = i
		}
		if r.refCol < 0 && strings.EqualFold(names[i], r.columns.refName()) {
			r.refCol = i
		}
	}
	if r.readErr = r.columns.missing(names, r.domainCol, r.refCol); r.readErr != nil {
		return false
	}
	r.csv.keep = func(col int) bool { return col == r.domainCol || col == r.refCol }
	return true
}

// csvError is the error of a CSV that cannot be read on: a record over a
// bound (what is the row, or the header), a header that is not CSV, or
// the body's own error.
func (r *Reader) csvError(err error, what string) error {
	var serr *csvSyntaxError
	switch {
	case errors.Is(err, errRecordTooLarge):
		return &Error{Code: CodeRecordTooLarge,
			Detail: fmt.Sprintf("%s is longer than %d bytes (is a quoted field never closed?); a CSV row may have at most %d bytes and %d fields.",
				what, maxRecordBytes, maxRecordBytes, maxCSVFields)}
	case errors.Is(err, errUnclosedQuote):
		return &Error{Code: CodeUnreadable,
			Detail: fmt.Sprintf("%s opens a quoted field on line %d that is never closed: every line after it would be read into that field. "+
				"Close the quote; a quote inside a quoted field is written twice (\"\").", what, r.csv.start)}
	case errors.Is(err, errTooManyFields):
		return &Error{Code: CodeRecordTooLarge,
			Detail: fmt.Sprintf("%s has more than %d fields; a CSV row may have at most %d bytes and %d fields.",
				what, maxCSVFields, maxRecordBytes, maxCSVFields)}
	case errors.As(err, &serr):
		return &Error{Code: CodeUnreadable,
			Detail: fmt.Sprintf("%s is not valid CSV: %v.", what, serr)}
	}
	return r.readError(err, "")
}

// Columns name the columns of a CSV that hold each row's domain and ref
// (the API's ?domain_column= and ?ref_column=, the CLI's --domain-column
// and --ref-column); "" is the default: "domain", and "ref" when the
// header has one. Header names match in any case; the other columns are
// dropped.
type Columns struct{ Domain, Ref string }

func (c Columns) domainName() string { return cmp.Or(c.Domain, "domain") }
func (c Columns) refName() string    { return cmp.Or(c.Ref, "ref") }

// missing is the error of a header without the domain column, or without
// the ref column asked for, naming the columns it has.
func (c Columns) missing(header []string, domainCol, refCol int) error {
	quoted := make([]string, len(header))
	for i, h := range header {
		quoted[i] = strconv.Quote(h)
	}
	found := Clip(strings.Join(quoted, ","))
	switch {
	case domainCol < 0 && c.Domain == "":
		return &Error{Code: CodeNoDomainColumn,
			Detail: fmt.Sprintf("The CSV header has no column %q; its columns are %s. Name the column of the domains with ?domain_column=.",
				c.domainName(), found)}
	case domainCol < 0:
		return &Error{Code: CodeNoDomainColumn,
			Detail: fmt.Sprintf("The CSV header has no column %q (domain_column); its columns are %s.", c.Domain, found)}
	case refCol < 0 && c.Ref != "":
		return &Error{Code: CodeNoRefColumn,
			Detail: fmt.Sprintf("The CSV header has no column %q (ref_column); its columns are %s.", c.Ref, found)}
	}
	return nil
}

// Key is the mapping as the API's Idempotency-Key fingerprint sees it:
// each name in lower case, "" for the default.
func (c Columns) Key() (domain, ref string) {
	norm := func(name, def string) string {
		if n := strings.ToLower(name); n != def {
			return n
		}
		return ""
	}
	return norm(c.Domain, "domain"), norm(c.Ref, "ref")
}
