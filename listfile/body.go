package listfile

import (
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

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

// BodyOptions say how a body is read.
type BodyOptions struct {
	// MaxBytes bounds the body, as sent and after decompression.
	MaxBytes int64
	// Gzip: the body is gzip (a server's Content-Encoding).
	Gzip bool
	// Hashed: the body, decompressed, is hashed as it is read (Hash).
	Hashed bool
}

// Body is a list's body: decompressed when it is gzip, cut off with an
// *Error (CodeTooLarge) beyond MaxBytes or beyond maxGzipRatio, and hashed
// as it is read when asked. Errors of the reader it reads are returned
// inside an *Error (CodeUnreadable) that wraps them.
type Body struct {
	r    io.Reader
	n    int64
	max  int64
	gzip bool
	hash hash.Hash // nil: not hashed
	sent *sentReader
}

// errSentTooLarge is a body over MaxBytes as sent.
var errSentTooLarge = errors.New("body too large")

// sentReader counts the bytes of the body as sent, and stops past max.
type sentReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (s *sentReader) Read(p []byte) (int, error) {
	if s.n > s.max {
		return 0, errSentTooLarge
	}
	n, err := s.r.Read(p)
	if s.n += int64(n); s.n > s.max {
		return n, errSentTooLarge
	}
	return n, err
}

// OpenBody opens the body in. It returns the Body even with an error (an
// *Error: not gzip), so that what was read of in can be told (Sent).
func OpenBody(in io.Reader, o BodyOptions) (*Body, error) {
	b := &Body{max: o.MaxBytes, sent: &sentReader{r: in, max: o.MaxBytes}}
	b.r = b.sent
	if o.Gzip {
		zr, err := gzip.NewReader(b.sent)
		if err != nil {
			return b, b.notGzip(err)
		}
		b.r, b.gzip = zr, true
	}
	if o.Hashed {
		b.hash = sha256.New()
	}
	return b, nil
}

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.hash != nil {
		b.hash.Write(p[:n])
	}
	if b.n > b.max {
		return n, b.tooLarge()
	}
	if b.gzip && b.n > gzipRatioGrace && b.n > maxGzipRatio*b.sent.n {
		return n, &Error{Code: CodeTooLarge,
			Detail: fmt.Sprintf("The body decompresses to more than %d times its compressed size, which no export does "+
				"(a gzip bomb?); send it uncompressed, or split it.", maxGzipRatio)}
	}
	switch {
	case errors.Is(err, errSentTooLarge):
		return n, b.tooLarge()
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader):
		return n, b.notGzip(err)
	case err != nil && err != io.EOF:
		return n, &Error{Code: CodeUnreadable, Detail: fmt.Sprintf("The body could not be read: %v.", err), Err: err}
	}
	return n, err
}

// Hash is the hash of the body read so far, decompressed; nil when not
// Hashed.
func (b *Body) Hash() hash.Hash { return b.hash }

// Sent is how many bytes of the body, as sent, were read.
func (b *Body) Sent() int64 { return b.sent.n }

func (b *Body) tooLarge() error {
	return &Error{Code: CodeTooLarge, Detail: fmt.Sprintf("The list is larger than %d bytes (after decompression); split it.", b.max)}
}

// notGzip is the error of a body that is not gzip; it wraps the reader's
// own error (a slow caller's, before the gzip header was in).
func (b *Body) notGzip(err error) error {
	return &Error{Code: CodeUnreadable, Detail: "The body is not valid gzip.", Err: err}
}
