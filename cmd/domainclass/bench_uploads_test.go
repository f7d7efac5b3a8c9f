//go:build bench

package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The hostile bodies of issue 22: the worst body of each format for the
// API's memory, and a gzip bomb for its time. Each is a dry run, as the
// review sent them.

// repeatReader yields n copies of b.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// worstBody is a body of size bytes: prefix, then one byte repeated.
type worstBody struct {
	name, contentType, prefix string
	fill                      byte
	size                      int64
}

func (w worstBody) reader() io.Reader {
	return io.MultiReader(strings.NewReader(w.prefix), &repeatReader{b: w.fill, n: w.size - int64(len(w.prefix))})
}

// postBody posts body as a dry run and returns the status (0 when the
// connection failed before an answer) and how long it took.
func postBody(t *testing.T, base, contentType, encoding string, body io.Reader, size int64) (int, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/lists?dry_run=true", body)
	require.NoError(t, err)
	req.ContentLength = size
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	took := time.Since(start)
	if err != nil {
		t.Logf("%s: %v after %s", contentType, err, took)
		return 0, took
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, took
}

// benchWorstBodies sends each format's worst body to the API (pid) and
// compares its RSS growth with normal, the growth of the normal million-row
// upload; then a gzip bomb, timed.
func benchWorstBodies(t *testing.T, base string, pid int, normal float64) []benchRow {
	const big = 250 << 20
	var rows []benchRow
	for _, w := range []worstBody{
		{"CSV, one quoted field never closed", "text/csv", "domain\n\"", 'a', big},
		{"CSV, 20 MiB of commas", "text/csv", "domain\nacme.com", ',', 20 << 20},
		{"NDJSON, one line", "application/x-ndjson", `{"domain": "`, 'a', big},
		{"text, one line", "text/plain", "", 'a', big},
	} {
		var (
			code int
			took time.Duration
		)
		before, peak := rssDuring(t, pid, func() { code, took = postBody(t, base, w.contentType, "", w.reader(), w.size) })
		rows = append(rows, benchRow{"lists", fmt.Sprintf("worst body, %s (%.0f MiB), dry run: API RSS growth", w.name, float64(w.size)/(1<<20)),
			fmt.Sprintf("%.0f MiB", peak-before), fmt.Sprintf("HTTP %d in %.1f s; the normal upload's growth %.0f MiB", code, took.Seconds(), normal),
			"≤ the normal upload's", verdict(code >= 400 && peak-before <= normal)})
	}

	// 1 GiB of newlines in about 1 MiB of gzip: 413 after 12–13 s and 5.3
	// CPU-seconds before the ratio cap.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	require.NoError(t, err)
	_, err = io.Copy(zw, &repeatReader{b: '\n', n: 1 << 30})
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	cpu0 := cpuSeconds(t, pid)
	code, took := postBody(t, base, "text/plain", "gzip", bytes.NewReader(gz.Bytes()), int64(gz.Len()))
	cpu := cpuSeconds(t, pid) - cpu0
	rows = append(rows, benchRow{"lists", fmt.Sprintf("gzip bomb (%.1f MiB of gzip, 1 GiB of newlines), dry run: time to the 413", float64(gz.Len())/(1<<20)),
		fmt.Sprintf("%.2f s (API CPU %.2f s)", took.Seconds(), cpu), fmt.Sprintf("HTTP %d; before the ratio cap 12–13 s, 5.3 CPU-s", code),
		"≤ 1 s", verdict(code == http.StatusRequestEntityTooLarge && took <= time.Second)})
	return rows
}
