package listfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// A 1 MB gzip of 1 GiB of newlines took 12–13 s and 5.3 CPU-seconds to
// refuse: everything up to LIST_MAX_BYTES was decompressed and read. The
// refusal comes after a bounded amount of output now (time is for the
// bench, "gzip bomb" row).
func TestBody_AGzipBombStopsEarly(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	require.NoError(t, err)
	newlines := bytes.Repeat([]byte("\n"), 1<<20)
	for range 64 {
		_, err := zw.Write(newlines)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())

	body, err := OpenBody(bytes.NewReader(gz.Bytes()), BodyOptions{MaxBytes: 1 << 30, Gzip: true})
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, body)
	var e *Error
	require.True(t, errors.As(err, &e), "64 MiB out of %d KiB of gzip is refused: %v", gz.Len()>>10, err)
	require.Equal(t, CodeTooLarge, e.Code)
	require.LessOrEqual(t, body.n, int64(2<<20), "bytes decompressed before the refusal")
}
