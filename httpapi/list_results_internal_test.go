package httpapi

import "testing"

// A page's rows follow the rows' size, so that a page is about
// resultsPageBytes, within bounds.
func TestNextPageRows(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		rows, bytes int
		want        int
	}{
		{"unanswered CSV rows, 62 bytes", 5_000, 5_000 * 62, 15_221},
		{"answered NDJSON rows, 1.7 kB", 1_000, 1_700_000, 555},
		{"a page that filled its buffer early", 2_000, resultsPageBytes + 400, 1_799},
		{"a filter that kept nothing", 50_000, 0, resultsMaxPageRows},
		{"a filter that kept a row or two", 50_000, 900, resultsMaxPageRows},
		{"rows of 64 KiB", 16, 16 << 16, resultsMinPageRows},
	} {
		if got := nextPageRows(tt.rows, tt.bytes); got != tt.want {
			t.Errorf("%s: nextPageRows(%d, %d) = %d, want %d", tt.name, tt.rows, tt.bytes, got, tt.want)
		}
	}
}
