// Package listfile reads a list of domains, as a POST /lists body or as
// the file the CLI is given, into rows: the one reader of both, so that a
// file the CLI reads one way is never refused or read another way by the
// server. A row is normalized (classifier.NormalizeDomain), cut to what is
// stored, deduplicated, or rejected with its reason; a body that cannot be
// read on, or crosses a limit, is refused whole with an *Error.
//
// It knows no HTTP: the server maps an *Error's Code to a problem type and
// its status, and the CLI prints its Detail.
package listfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Format is how a list is written (a body's Content-Type).
type Format string

const (
	CSV    Format = "text/csv"             // a header row with a domain column, optional ref
	NDJSON Format = "application/x-ndjson" // {"domain": "...", "ref": "..."} per line
	Text   Format = "text/plain"           // a domain per line; blank and # lines skipped
)

// Code says why a list is refused; it is the API's problem type.
type Code string

const (
	// CodeTooLarge: more rows, bytes or stored bytes than allowed.
	CodeTooLarge Code = "list-too-large"
	// CodeRecordTooLarge: a CSV record over maxRecordBytes or maxCSVFields.
	CodeRecordTooLarge Code = "csv-record-too-large"
	// CodeUnreadable: the body stopped being readable, or is not CSV where
	// it must be (its header, a quote never closed).
	CodeUnreadable Code = "unreadable-list"
	// CodeNoDomainColumn: the CSV header has no domain column.
	CodeNoDomainColumn Code = "no-domain-column"
	// CodeNoRefColumn: the CSV header has no ref column asked for.
	CodeNoRefColumn Code = "no-ref-column"
)

// Error is a list refused whole: Detail says why and what to do. Err is
// the error of the body (its reader's) that stopped the reading, if any.
type Error struct {
	Code   Code
	Detail string
	Err    error
}

func (e *Error) Error() string { return e.Detail }
func (e *Error) Unwrap() error { return e.Err }

// MaxInputBytes caps what a row keeps of its input (and ref): anything
// longer is no domain, and the answer only needs to say which row it was.
const MaxInputBytes = 512

// maxLineBytes caps an NDJSON or text line.
const maxLineBytes = 64 << 10

// Detect tells a CSV from a list of domains, one a line, by its first
// line: a CSV's (its header) has a comma. The server goes by the
// Content-Type; the CLI, which chooses it, by this.
func Detect(r *bufio.Reader) (Format, error) {
	first, err := r.Peek(4096)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("cannot read the domain list: %w", err)
	}
	if line, _, _ := bytes.Cut(first, []byte("\n")); bytes.IndexByte(line, ',') >= 0 {
		return CSV, nil
	}
	return Text, nil
}
