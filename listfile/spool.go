package listfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/domainclass/domainclass/db"
)

// Spool holds an upload's rows as COPY writes them, in a temporary file:
// the body is read, decompressed, parsed and normalized into it while the
// upload holds no database connection, however slowly the caller sends;
// then COPY reads it at disk speed. The file is removed as soon as it is
// created, so it lives as long as its descriptor, whatever becomes of the
// request or of the process.
//
// A row is written compactly: its input, ref, domain, first row and
// reason, each string as a uvarint length and its bytes (a CRM export's
// row takes about 60 bytes; row numbers are implicit, 1, 2, …).
type Spool struct {
	f    *os.File
	w    *bufio.Writer
	n    int64
	max  int64
	rows int
	buf  []byte
}

// SpoolLimit bounds an upload's spool, from the list limits (a body's
// bytes, after decompression, and its rows), so that it never refuses a
// list the others accept: a row keeps its input and ref,
// from the body (at most three times their bytes there: a control byte
// is stored as the three of U+FFFD), and a domain, a reason and their
// lengths (spoolRowBytes). A CRM export's row takes about 60 bytes: a
// million rows, 60 MB.
func SpoolLimit(maxBytes int64, maxRows int) int64 { return 3*maxBytes + int64(maxRows)*spoolRowBytes }

// spoolRowBytes bounds what a row adds to its input and ref: a domain (253
// bytes), a reason and five lengths.
const spoolRowBytes = 400

// spoolBufferBytes is the spool's read and write buffer.
const spoolBufferBytes = 64 << 10

// NewSpool creates an empty spool in dir ("" is os.TempDir()), of at most
// max bytes. It returns the error of creating its file.
func NewSpool(dir string, max int64) (*Spool, error) {
	f, err := os.CreateTemp(dir, "domainclass-upload-*")
	if err != nil {
		return nil, fmt.Errorf("error creating the upload's spool file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("error unlinking the upload's spool file: %w", err)
	}
	return &Spool{f: f, w: bufio.NewWriterSize(f, spoolBufferBytes), max: max}, nil
}

// Close closes the file, which frees it.
func (s *Spool) Close() error { return s.f.Close() }

// Add appends a row (rows come in order: r.Row is not written). It
// returns an *Error (CodeTooLarge) when the spool would outgrow its bound,
// or the error of writing the file.
func (s *Spool) Add(r db.ListRowIn) error {
	b := s.buf[:0]
	for _, v := range []string{r.Input, r.Ref, r.Domain} {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.AppendUvarint(b, uint64(r.FirstRow))
	b = binary.AppendUvarint(b, uint64(len(r.Reason)))
	b = append(b, r.Reason...)
	s.buf = b
	if s.n += int64(len(b)); s.n > s.max {
		return &Error{Code: CodeTooLarge, Detail: fmt.Sprintf("The list's rows take more than %d bytes as stored; split it.", s.max)}
	}
	s.rows++
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("error writing the upload's spool file: %w", err)
	}
	return nil
}

// Read returns a reader of the rows from the first; call it once every
// row is added. It returns the error of reading the file.
func (s *Spool) Read() (*SpoolReader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("error writing the upload's spool file: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("error reading the upload's spool file: %w", err)
	}
	return &SpoolReader{r: bufio.NewReaderSize(s.f, spoolBufferBytes), left: s.rows}, nil
}

// SpoolReader reads a spool's rows in order: it is the db.ListRowSource
// that COPY writes from.
type SpoolReader struct {
	r    *bufio.Reader
	left int
	cur  db.ListRowIn
	buf  []byte
	err  error
}

// Next reads the next row; false at the end or on an error (Err). A
// row's strings share one allocation.
func (s *SpoolReader) Next() bool {
	if s.err != nil || s.left == 0 {
		return false
	}
	s.left--
	s.buf = s.buf[:0]
	var ends [4]int
	var first uint64
	for i := range ends {
		if i == 3 {
			if first, s.err = s.uvarint(); s.err != nil {
				return false
			}
		}
		if s.err = s.appendString(); s.err != nil {
			return false
		}
		ends[i] = len(s.buf)
	}
	all := string(s.buf)
	s.cur = db.ListRowIn{Row: s.cur.Row + 1, Input: all[:ends[0]], Ref: all[ends[0]:ends[1]], Domain: all[ends[1]:ends[2]],
		FirstRow: int(first), Reason: all[ends[2]:ends[3]]}
	return true
}

func (s *SpoolReader) uvarint() (uint64, error) {
	n, err := binary.ReadUvarint(s.r)
	if err != nil {
		return 0, s.readError(err)
	}
	return n, nil
}

// appendString reads a string's length and bytes onto buf.
func (s *SpoolReader) appendString() error {
	n, err := s.uvarint()
	if err != nil {
		return err
	}
	if n > maxLineBytes {
		return errors.New("error reading the upload's spool file: a string too long")
	}
	start := len(s.buf)
	s.buf = append(s.buf, make([]byte, n)...)
	if _, err := io.ReadFull(s.r, s.buf[start:]); err != nil {
		return s.readError(err)
	}
	return nil
}

func (s *SpoolReader) readError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the rows were counted: the file is short
	}
	return fmt.Errorf("error reading the upload's spool file: %w", err)
}

// Row is the row Next read.
func (s *SpoolReader) Row() db.ListRowIn { return s.cur }

// Err is why Next stopped early.
func (s *SpoolReader) Err() error { return s.err }
