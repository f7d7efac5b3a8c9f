package httpapi

import "testing"

// Issue 36: q-values were ignored ("text/csv;q=0, application/x-ndjson"
// gave CSV).
func TestNegotiateResults(t *testing.T) {
	t.Parallel()
	const none listFormat = ""
	for _, tc := range []struct {
		accept string
		want   listFormat
	}{
		{"", formatCSV},
		{"text/csv", formatCSV},
		{"application/x-ndjson", formatNDJSON},
		{"application/jsonl", formatNDJSON},
		{"Application/X-NDJSON; charset=utf-8", formatNDJSON},
		{"*/*", formatCSV},
		{"text/*", formatCSV},
		{"application/*", formatNDJSON},
		{"application/x-ndjson, text/csv", formatCSV},             // a tie: CSV
		{"text/csv;q=0, application/x-ndjson", formatNDJSON},      // q=0: not acceptable
		{"text/csv;q=0.5, application/x-ndjson", formatNDJSON},    // the higher q wins
		{"text/csv;q=0.9, application/x-ndjson;q=0.8", formatCSV}, // ... whichever it is
		{"*/*;q=0.1, application/x-ndjson", formatNDJSON},
		{"*/*, text/csv;q=0", formatNDJSON}, // the most specific range decides
		{"text/*;q=0, */*", formatNDJSON},
		{"application/x-ndjson;q=0, application/*", none}, // x-ndjson itself refused; no CSV asked
		{"application/x-ndjson;q=0, */*", formatCSV},
		{"application/jsonl;q=0.3, text/csv;q=0.2", formatNDJSON},
		{"text/csv;q=0, application/x-ndjson;q=0", none},
		{"*/*;q=0", none},
		{"application/json", none},
		{"application/pdf, text/html", none},
		{"text/csv;q=2", none}, // not a q-value: the range is ignored
		{"text/csv;q=abc, application/x-ndjson", formatNDJSON},
		{"text/csv ; Q=0 , application/x-ndjson", formatNDJSON},
		{"garbage", none},
	} {
		got, ok := negotiateResults(tc.accept)
		if got != tc.want || ok != (tc.want != none) {
			t.Errorf("Accept %q: got %q (ok %t), want %q", tc.accept, got, ok, tc.want)
		}
	}
}
