package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// rows yields n list rows; every tenth is a duplicate of the row five
// before it.
type rows struct {
	n, i int
}

func (r *rows) Next() bool { r.i++; return r.i <= r.n }
func (r *rows) Err() error { return nil }
func (r *rows) Row() db.ListRowIn {
	if r.i%10 == 0 {
		return db.ListRowIn{Row: r.i, Input: fmt.Sprintf("d%d.com", r.i-5), Domain: fmt.Sprintf("d%d.com", r.i-5), FirstRow: r.i - 5}
	}
	return db.ListRowIn{Row: r.i, Input: fmt.Sprintf("d%d.com", r.i), Domain: fmt.Sprintf("d%d.com", r.i)}
}

// tuplesRead is how many list_row tuples tx has read so far, by any scan
// of the table or of its indexes.
func tuplesRead(t *testing.T, tx db.DBTX) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT sum(pg_stat_get_xact_tuples_returned(oid) + pg_stat_get_xact_tuples_fetched(oid))::bigint
		FROM pg_class
		WHERE oid = 'list_row'::regclass OR oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'list_row'::regclass)`).Scan(&n))
	return n
}

// Answering a row, or failing a chunk, reads those rows and their
// duplicates, not the whole list, even when list_row's statistics predate
// the upload (autovacuum has not analyzed it yet): otherwise a million-row
// list drains at a few rows a second.
func TestListRowUpdates_ReadTheirRowsNotTheList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	upload := func(n int) *classifier.List {
		l := &classifier.List{ID: uuid.New(), Caller: "a", Classifier: "cpg", Rows: n, Domains: n - n/10, Duplicates: n / 10, ChunkRows: 200, Chunks: n / 200, Retention: time.Hour}
		require.NoError(t, db.ListInsert(ctx, tx, l, 0))
		copied, err := db.ListRowsCopy(ctx, tx, l.ID, &rows{n: n})
		require.NoError(t, err)
		require.EqualValues(t, n, copied)
		return l
	}
	upload(2_000)
	_, err := tx.Exec(ctx, `ANALYZE list_row`) // statistics that know only that list
	require.NoError(t, err)
	l := upload(20_000)

	before := tuplesRead(t, tx)
	done, err := db.ListRowFinish(ctx, tx, l.ID, 5, classifier.Result{Domain: "d5.com", Classifier: "cpg",
		Status: classifier.StatusCompleted, Answer: true, Confidence: 4, Source: classifier.SourceKnown, ClassifiedAt: time.Now()}, "o")
	require.NoError(t, err)
	require.Equal(t, 2, done, "row 5 and its duplicate, row 10")
	require.Less(t, tuplesRead(t, tx)-before, int64(100), "tuples of list_row read to answer one row")

	before = tuplesRead(t, tx)
	failed, err := db.ListRowsFail(ctx, tx, l.ID, 1, 200, "out of attempts")
	require.NoError(t, err)
	require.Equal(t, 200-2, failed, "rows 1-200 and their duplicates but 5 and 10, answered")
	require.Less(t, tuplesRead(t, tx)-before, int64(1000), "tuples of list_row read to fail a chunk")
}
