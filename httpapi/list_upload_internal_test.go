package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
)

// A 1 MB gzip of 1 GiB of newlines took 12–13 s and 5.3 CPU-seconds to
// refuse: everything up to LIST_MAX_BYTES was decompressed and read. The
// refusal comes after a bounded amount of output now (time is for the
// bench, "gzip bomb" row).
func TestListBody_AGzipBombStopsEarly(t *testing.T) {
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

	req := httptest.NewRequest(http.MethodPost, "/lists", bytes.NewReader(gz.Bytes()))
	req.Header.Set("Content-Encoding", "gzip")
	body, err := openListBody(req, nil, DefaultListLimits(), false)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, body)
	var p *problem
	require.True(t, errors.As(err, &p), "64 MiB out of %d KiB of gzip is refused: %v", gz.Len()>>10, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, p.status)
	require.LessOrEqual(t, body.n, int64(2<<20), "bytes decompressed before the refusal")
}

// Keys stored before tier, the column mapping (and max_age and refresh)
// were in the fingerprint keep replaying the requests that did not use
// them.
func TestListFingerprint_KeysOfEarlierRequestsStayValid(t *testing.T) {
	t.Parallel()
	body := sha256.New()
	body.Write([]byte("domain\nacme.com\n"))
	old, _ := json.Marshal([]any{"list", "cpg", formatCSV, "https://example.com/h", body.Sum(nil)})
	want := sha256.Sum256(old)
	req := listRequest{cls: &classifier.Classifier{Name: "cpg"}, format: formatCSV, callbackURL: "https://example.com/h",
		tier: classifier.TierStandard, columns: csvColumns{Domain: "Domain", Ref: "REF"}}
	require.Equal(t, want[:], listFingerprint(req, body), "the defaults, named or not")
}
