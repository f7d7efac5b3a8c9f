package db_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// BenchmarkListResultsPage reads the rows of a list of BENCH_RESULTS_ROWS
// rows (default a million, PENDING, as a CSV shows them) in pages of
// several sizes, each on a connection of its own from the pool, against
// one read of the whole range (what the cursor read of before did), and
// reports rows a second.
//
//	go test ./db -run '^$' -bench BenchmarkListResultsPage -benchtime 3x
func BenchmarkListResultsPage(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_RESULTS_ROWS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	d := dbtest.New(b)
	domains := make([]string, n)
	for i := range domains {
		domains[i] = fmt.Sprintf("company%07d.com", i+1)
	}
	l := newList(b, d.Pool, "a", time.Hour, domains...)
	_, err := d.Pool.Exec(ctx, `ANALYZE list_row`)
	require.NoError(b, err)
	for _, rows := range []int{n, 20_000, 5_000} {
		name := fmt.Sprintf("page=%d", rows)
		if rows == n {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				got := 0
				for p := (db.ListResultsParams{ListID: l.ID, ListStatus: l.Status, URLsOnly: true}); p.After < n; {
					p.Through = min(p.After+rows, n)
					conn, err := d.Pool.Acquire(ctx)
					require.NoError(b, err)
					p.After, err = db.ListResultsPage(ctx, conn, p, func(*classifier.ListRow) bool { got++; return true })
					conn.Release()
					require.NoError(b, err)
				}
				require.Equal(b, n, got)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
