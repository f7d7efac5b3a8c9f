package db_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// newList writes a list of caller with one row per domain, kept for
// retention once it ends.
func newList(t testing.TB, exec db.DBTX, caller string, retention time.Duration, domains ...string) *classifier.List {
	t.Helper()
	ctx := context.Background()
	src := &rowSlice{}
	for i, d := range domains {
		src.rows = append(src.rows, db.ListRowIn{Row: i + 1, Input: d, Domain: d})
	}
	l := &classifier.List{ID: uuid.New(), Caller: caller, Classifier: "cpg", Rows: len(domains), Domains: len(domains),
		ChunkRows: 200, Chunks: 1, Retention: retention}
	_, err := db.ListRowsCopy(ctx, exec, l.ID, src)
	require.NoError(t, err)
	require.NoError(t, db.ListInsert(ctx, exec, l, 0))
	return l
}

type rowSlice struct {
	rows []db.ListRowIn
	i    int
}

func (s *rowSlice) Next() bool        { s.i++; return s.i <= len(s.rows) }
func (s *rowSlice) Row() db.ListRowIn { return s.rows[s.i-1] }
func (s *rowSlice) Err() error        { return nil }

// modelAnswer is a fresh answer from the model for domain: stored, it gets
// a provenance row of its own.
func modelAnswer(domain string) classifier.Result {
	return classifier.Result{Domain: domain, Classifier: "cpg", Status: classifier.StatusCompleted, Answer: true,
		Confidence: 4, Reasoning: "Snacks.", Source: classifier.SourceLLM, ClassifiedAt: time.Now(), Model: "m",
		PromptVersion: "v1", Evidence: []classifier.EvidenceItem{{URL: "https://" + domain + "/"}}}
}

// expire ends list id, COMPLETED, longer ago than its retention.
func expire(t *testing.T, exec db.DBTX, id uuid.UUID) {
	t.Helper()
	_, err := exec.Exec(context.Background(), `UPDATE list SET status = 'COMPLETED', completed_at = now() - retention - interval '1 minute'
		WHERE id = $1`, id)
	require.NoError(t, err)
}

// purgeLists takes every expired list off and deletes its rows, as the
// purge worker does before it looks at provenance.
func purgeLists(t *testing.T, exec db.DBTX) {
	t.Helper()
	ctx := context.Background()
	_, err := db.ListPurge(ctx, exec, 100)
	require.NoError(t, err)
	for {
		rows, lists, err := db.ListRowsPurge(ctx, exec, 1000)
		require.NoError(t, err)
		if rows == 0 && lists == 0 {
			return
		}
	}
}

// staleHit returns what a cache hit read for domain just before a refresh
// replaced the answer, once every row that got the old answer has been
// purged: its provenance is referenced by nothing any more, and waits
// among the purge's candidates.
func staleHit(t *testing.T, d *db.DB, domain string) classifier.Result {
	t.Helper()
	ctx := context.Background()
	old := newList(t, d.Pool, "a", time.Hour, domain)
	_, err := db.ListRowFinish(ctx, d.Pool, old.ID, 1, modelAnswer(domain), "o")
	require.NoError(t, err)
	hit, err := db.ResultGet(ctx, d.Pool, "cpg", domain)
	require.NoError(t, err)
	hit.Source = classifier.SourceCache

	refreshed := newList(t, d.Pool, "a", time.Hour, domain)
	_, err = db.ListRowFinish(ctx, d.Pool, refreshed.ID, 1, modelAnswer(domain), "o")
	require.NoError(t, err)
	expire(t, d.Pool, old.ID)
	purgeLists(t, d.Pool)
	return *hit
}

// waitForLock waits until the backend pid waits for a lock, or until its
// statement has finished (done).
func waitForLock(t *testing.T, d *db.DB, pid uint32, done *atomic.Bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, d.Pool.QueryRow(context.Background(),
			`SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting))
		return waiting || done.Load()
	}, dbtest.Patience(), 5*time.Millisecond, "backend %d waits for a lock", pid)
}

// purgeOutcome is what a ProvenancePurge came to.
type purgeOutcome struct {
	deleted int64
	err     error
}

// purgeBehind runs a provenance purge on a connection of its own while
// writer's transaction is open, waits until the purge waits for a lock the
// writer holds, commits the writer and returns what the purge did then.
func purgeBehind(t *testing.T, d *db.DB, writer pgx.Tx) purgeOutcome {
	t.Helper()
	ctx := context.Background()
	purger, err := d.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer purger.Release()
	done := make(chan purgeOutcome, 1)
	var finished atomic.Bool
	go func() {
		deleted, _, err := db.ProvenancePurge(ctx, purger, 100)
		finished.Store(true)
		done <- purgeOutcome{deleted, err}
	}()
	waitForLock(t, d, purger.Conn().PgConn().PID(), &finished)
	require.NoError(t, writer.Commit(ctx))
	return <-done
}

// dangling counts answer rows that point at a provenance row that does not
// exist.
func dangling(t *testing.T, exec db.DBTX) int {
	t.Helper()
	var n int
	require.NoError(t, exec.QueryRow(context.Background(), `
		SELECT count(*) FROM (
			SELECT provenance_id FROM list_row UNION ALL SELECT provenance_id FROM classify_job_domain
			UNION ALL SELECT provenance_id FROM result UNION ALL SELECT provenance_id FROM override
		) r WHERE provenance_id IS NOT NULL AND NOT EXISTS (SELECT FROM provenance p WHERE p.id = r.provenance_id)`).Scan(&n))
	return n
}

// A cache hit copies a provenance id onto a new row some time after it read
// it; meanwhile the purge may find that provenance referenced by nothing.
// Whichever comes first, no row ever points at a deleted provenance: a
// write that comes second fails (its job is retried, and reads the new
// answer), a purge that comes second keeps the provenance.
func TestProvenancePurge_RacesACacheHit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("PurgeFirst", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		hit := staleHit(t, d, "acme.com")
		next := newList(t, d.Pool, "a", time.Hour, "acme.com")

		purge, err := d.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = purge.Rollback(ctx) }()
		deleted, _, err := db.ProvenancePurge(ctx, purge, 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, deleted, "the old answer's provenance, which nothing refers to")

		writer, err := d.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer writer.Release()
		done := make(chan error, 1)
		var finished atomic.Bool
		go func() {
			_, err := db.ListRowFinish(ctx, writer, next.ID, 1, hit, "o")
			finished.Store(true)
			done <- err
		}()
		waitForLock(t, d, writer.Conn().PgConn().PID(), &finished)
		require.NoError(t, purge.Commit(ctx))
		err = <-done
		require.Zero(t, dangling(t, d.Pool), "no row points at the deleted provenance")
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "the write after the purge fails: %v", err)
		require.Equal(t, "23503", pgErr.Code, "a foreign key violation: %s", pgErr.Message)

		// Retried, the row reads the answer that replaced the old one.
		fresh, err := db.ResultGet(ctx, d.Pool, "cpg", "acme.com")
		require.NoError(t, err)
		fresh.Source = classifier.SourceCache
		n, err := db.ListRowFinish(ctx, d.Pool, next.ID, 1, *fresh, "o")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Zero(t, dangling(t, d.Pool))
	})

	t.Run("WriterFirst", func(t *testing.T) {
		t.Parallel()
		d := dbtest.New(t)
		hit := staleHit(t, d, "acme.com")
		next := newList(t, d.Pool, "a", time.Hour, "acme.com")

		writer, err := d.Pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = writer.Rollback(ctx) }()
		n, err := db.ListRowFinish(ctx, writer, next.ID, 1, hit, "o")
		require.NoError(t, err)
		require.Equal(t, 1, n)

		got := purgeBehind(t, d, writer)
		require.Zero(t, dangling(t, d.Pool), "the row's provenance is still there")
		require.NoError(t, got.err, "the purge that comes second keeps what the row now refers to")
		require.Zero(t, got.deleted)
		rows := map[int]classifier.ListRow{}
		_, err = db.ListResultsPage(ctx, d.Pool, db.ListResultsParams{ListID: next.ID, Through: next.Rows},
			func(r *classifier.ListRow) bool { rows[r.Row] = *r; return true })
		require.NoError(t, err)
		require.Equal(t, hit.ProvenanceID, rows[1].Result.ProvenanceID)
		require.Equal(t, "m", rows[1].Result.Model, "and its provenance is there to read")
	})
}

// A list's answered rows written as a set (ListAnswerKnown) are not locked
// row by row: the set holds the purge off instead. The result moves on
// while the set's transaction is open, so that the purge finds the
// provenance the set just wrote referred to by nothing it can see: it waits
// for the set, then keeps it.
func TestProvenancePurge_RacesASetOfCacheHits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	_, err := db.ListRowFinish(ctx, d.Pool, uuid.New(), 1, modelAnswer("acme.com"), "o")
	require.NoError(t, err)
	cached, err := db.ResultGet(ctx, d.Pool, "cpg", "acme.com")
	require.NoError(t, err)
	next := newList(t, d.Pool, "a", time.Hour, "acme.com")

	writer, err := d.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	k, err := db.ListAnswerKnown(ctx, writer, next.ID, "cpg", 1, 1, classifier.DefaultFreshness(), classifier.Want{}, time.Now())
	require.NoError(t, err)
	require.Equal(t, db.Known{Cache: 1, Rows: 1}, k)
	// Meanwhile the model answers acme.com again: the provenance the set
	// wrote is a candidate, and nothing the purge can see refers to it.
	_, err = db.ListRowFinish(ctx, d.Pool, uuid.New(), 1, modelAnswer("acme.com"), "o")
	require.NoError(t, err)

	got := purgeBehind(t, d, writer)
	require.NoError(t, got.err)
	require.Zero(t, dangling(t, d.Pool), "the row's provenance is still there")
	require.Zero(t, got.deleted, "the purge that comes second keeps what the row now refers to")
	rows := map[int]classifier.ListRow{}
	_, err = db.ListResultsPage(ctx, d.Pool, db.ListResultsParams{ListID: next.ID, Through: next.Rows},
		func(r *classifier.ListRow) bool { rows[r.Row] = *r; return true })
	require.NoError(t, err)
	require.Equal(t, cached.ProvenanceID, rows[1].Result.ProvenanceID)
	require.Equal(t, "m", rows[1].Result.Model, "and its provenance is there to read")
}

// A caller's stored rows are its lists' rows, ended or not, until they are
// purged; the soonest a stored list expires is what a refused upload is
// told.
func TestListStorageOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	empty, err := db.ListStorageOf(ctx, tx, "a")
	require.NoError(t, err)
	require.Equal(t, db.ListStorage{}, empty)

	newList(t, tx, "a", time.Hour, "a.com", "b.com", "c.com") // running
	soon := newList(t, tx, "a", time.Hour, "d.com", "e.com")
	later := newList(t, tx, "a", 48*time.Hour, "f.com")
	newList(t, tx, "b", time.Hour, "g.com")
	_, err = tx.Exec(ctx, `UPDATE list SET status = 'CANCELLED', completed_at = now() - interval '10 minutes' WHERE id = $1`, soon.ID)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE list SET status = 'COMPLETED', completed_at = now() - interval '30 minutes' WHERE id = $1`, later.ID)
	require.NoError(t, err)

	s, err := db.ListStorageOf(ctx, tx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 6, s.Rows, "running and ended lists count, another caller's do not")
	require.NotNil(t, s.NextExpiry)
	require.WithinDuration(t, time.Now().Add(50*time.Minute), *s.NextExpiry, 5*time.Second,
		"the list that ended 10 minutes ago, kept for an hour")

	expire(t, tx, soon.ID)
	purgeLists(t, tx)
	s, err = db.ListStorageOf(ctx, tx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 4, s.Rows, "a purged list's rows no longer count")
	require.WithinDuration(t, time.Now().Add(47*time.Hour+30*time.Minute), *s.NextExpiry, 5*time.Second)
}

// TestMigrate_Retention takes 00011 up and down on a schema of its own:
// lists from before keep the reviewed 30 days, every provenance record is
// looked at once by the first purge, and a down leaves no rows of a list
// purged half-way behind.
func TestMigrate_Retention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "test_migrate_retention"
	emptySchema(t, name)
	d, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: name, MaxConns: 2})
	require.NoError(t, err)
	defer d.Close()
	river, err := rivermigrate.New(riverpgxv5.New(d.Pool), &rivermigrate.Config{Schema: name})
	require.NoError(t, err)
	_, err = river.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(d.Pool)
	defer sqlDB.Close()
	migrations, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("migrations"), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := d.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	count := func(sql string) (n int) {
		t.Helper()
		require.NoError(t, d.Pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}

	_, err = migrations.UpTo(ctx, 10)
	require.NoError(t, err)
	old, purging := uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{old, purging} {
		exec(`INSERT INTO list (id, caller, classifier, status, rows, domains, duplicates, rejected, chunk_rows, chunks, next_chunk, completed_at)
			VALUES ($1, 'a', 'cpg', 'COMPLETED', 2, 2, 0, 0, 200, 1, 1, now())`, id)
		exec(`INSERT INTO list_row (list_id, row, input, domain, status) VALUES ($1, 1, 'a.com', 'a.com', 'PENDING'), ($1, 2, 'b.com', 'b.com', 'PENDING')`, id)
	}
	exec(`INSERT INTO provenance (id, model) VALUES (gen_random_uuid(), 'm'), (gen_random_uuid(), 'm')`)

	_, err = migrations.UpByOne(ctx)
	require.NoError(t, err)
	// Read as 00011 left it (db.ListGet reads the columns of later
	// migrations too).
	l := &classifier.List{}
	require.NoError(t, d.Pool.QueryRow(ctx, `SELECT status, retention, completed_at FROM list WHERE id = $1`, old).
		Scan(&l.Status, &l.Retention, &l.CompletedAt))
	require.Equal(t, 30*24*time.Hour, l.Retention, "a list from before keeps the reviewed default")
	require.Equal(t, l.CompletedAt.Add(30*24*time.Hour), *l.ExpiresAt())
	require.Equal(t, 2, count(`SELECT count(*) FROM provenance_candidate`), "every provenance record is looked at once")

	exec(`WITH gone AS (DELETE FROM list WHERE id = $1 RETURNING id, rows) INSERT INTO list_purge (list_id, rows) SELECT id, rows FROM gone`, purging)
	_, err = migrations.Down(ctx)
	require.NoError(t, err)
	require.Zero(t, count(`SELECT count(*) FROM list_row WHERE list_id = '`+purging.String()+`'`), "no rows of a list purged half-way")
	require.Equal(t, 2, count(`SELECT count(*) FROM list_row`), "the other list's")
	_, err = migrations.UpByOne(ctx)
	require.NoError(t, err, "and up again")
}
