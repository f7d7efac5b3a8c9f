//go:build bench

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/db/dbtest"
)

// The capacity section (docs/operating.md, "Capacity"): what Postgres
// writes per answered domain — statements, rows, WAL bytes — when a list
// drains through an instant model with no rate limit, so that the
// database and this machine's CPU are all that bound it; and the
// domains/s they allow. Knob: BENCH_CAPACITY_DOMAINS (default 20000).
//
// The drain has a PostgreSQL cluster of its own (dbtest.NewCluster, as
// the restart drills), so that its WAL (pg_current_wal_lsn), commits and
// CPU are the drain's alone (less the checkpointer's and autovacuum's
// background, measured over 10 s before it); rows are the tables' own
// counters; statements are counted by the processes' pools. The CPU
// figures still share the machine: run it on a quiet one.

// counter counts the statements a pool sends: queries, each query of a
// batch, and COPYs.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *counter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// pgSnapshot is what the cluster and the schema had written at one time.
type pgSnapshot struct {
	at          time.Time
	wal         string // pg_current_wal_lsn
	ins, upd    int64  // this schema's tables
	del, hot    int64
	commits     int64 // the database's
	postgresCPU float64
}

func benchCapacity(t *testing.T) []benchRow {
	n := envInt("BENCH_CAPACITY_DOMAINS", 20000)
	cluster := dbtest.NewCluster(t)
	e := newE2E(t, llmtest.Steady(true, 4, "x", 0), map[string]string{
		"AUTH": "on", "LOG_LEVEL": "error", "LLM_MAX_CONCURRENCY": "64", "LLM_RATE_PER_MINUTE": "10000000",
		"LIST_DOMAIN_CONCURRENCY": "32", "DATABASE_URL": cluster.URL, "DATABASE_SCHEMA": "",
		// Answers with five pages of evidence, as a Brave-backed one has.
		"SEARCH_PROVIDER": "brave", "BRAVE_API_KEY": "bench", "BRAVE_BASE_URL": longSearch(t).URL,
	})
	e.schema = "public"
	code, _, errOut := e.cli(context.Background(), "", nil, "migrate")
	require.Equal(t, 0, code, errOut)
	count := &counter{}
	api := e.startCounted(cli.RoleAPI, count)
	c := client.New(api.APIURL(), e.apiKey("capacity"))
	conn, err := pgx.Connect(context.Background(), e.env["DATABASE_URL"])
	require.NoError(t, err)
	defer conn.Close(context.Background())
	m := &capacityMeter{t: t, conn: conn, schema: e.schema, postmaster: postmasterPID(t, conn)}
	m.background()

	// The upload: its rows written with COPY.
	var body strings.Builder
	body.WriteString("domain\n")
	for i := range n {
		fmt.Fprintf(&body, "cap%07d.com\n", i)
	}
	upload := m.measure(func() {
		_, err := c.UploadList(context.Background(), func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(body.String())), nil
		}, client.ListOptions{ContentType: client.ListCSV})
		require.NoError(t, err)
	})
	// The drain: one worker, an instant model, no rate limit.
	count.n.Store(0)
	var elapsed time.Duration
	drain := m.measure(func() {
		start := time.Now()
		e.startCounted(cli.RoleWorker, count)
		id := m.listID()
		_, err := c.WaitList(context.Background(), id, 100*time.Millisecond, nil)
		require.NoError(t, err)
		elapsed = time.Since(start)
	})
	statements := count.n.Load()
	per := func(v float64) float64 { return v / float64(n) }
	section := "capacity"
	return []benchRow{
		{section, fmt.Sprintf("a %d-domain list drained by one worker, instant model, no rate limit: domains/s", n),
			fmt.Sprintf("%.0f/s", float64(n)/elapsed.Seconds()), fmt.Sprintf("Postgres used %.2f of 2 cores meanwhile", drain.cpu), "-", "-"},
		{section, "  statements per answered domain (api and worker pools)", fmt.Sprintf("%.1f", per(float64(statements))),
			fmt.Sprintf("%d statements", statements), "≤ 3", verdict(per(float64(statements)) <= 3)},
		{section, "  commits per answered domain (the cluster's)", fmt.Sprintf("%.2f", per(drain.commits)),
			fmt.Sprintf("%.0f commits", drain.commits), "≤ 0.25", verdict(per(drain.commits) <= 0.25)},
		{section, "  rows written per answered domain", fmt.Sprintf("%.1f", per(drain.rows())),
			fmt.Sprintf("inserted %.1f, updated %.1f (HOT %.1f), deleted %.1f", per(drain.ins), per(drain.upd), per(drain.hot), per(drain.del)), "-", "-"},
		{section, "  WAL bytes per answered domain", fmt.Sprintf("%.0f B", per(drain.wal)),
			fmt.Sprintf("%.1f MiB in %s; the upload %.0f B a row more", drain.wal/(1<<20), elapsed.Round(time.Second), per(upload.wal)), "-", "-"},
		{section, "  domains/s one Postgres of 2 cores would allow (this rate ÷ its share of the CPU × 2)",
			fmt.Sprintf("%.0f/s", float64(n)/elapsed.Seconds()/max(drain.cpu, 0.01)*2), "its CPU, not its WAL, binds first", "-", "-"},
		{section, "  storage per answered domain (tables and indexes)", fmt.Sprintf("%.0f B", per(m.storage())),
			m.storageByTable(n), "-", "-"},
	}
}

// capacityMeter measures what a cluster writes while something runs.
type capacityMeter struct {
	t          *testing.T
	conn       *pgx.Conn
	schema     string
	postmaster int
	// The cluster's own WAL (bytes a second) and CPU (cores) with nothing of
	// ours running: checkpoints, autovacuum, the stats.
	bgWAL, bgCPU float64
}

// written is what a cluster wrote while something ran, less its own.
type written struct {
	wal, ins, upd, del, hot, commits, cpu float64
}

func (w written) rows() float64 { return w.ins + w.upd + w.del }

func (m *capacityMeter) background() {
	time.Sleep(2 * time.Second) // the migration's and the key's counters settle
	a := snapshot(m.t, m.conn, m.schema, m.postmaster)
	time.Sleep(10 * time.Second) // the cluster alone
	b := snapshot(m.t, m.conn, m.schema, m.postmaster)
	secs := b.at.Sub(a.at).Seconds()
	m.bgWAL, m.bgCPU = walDiff(m.t, m.conn, a.wal, b.wal)/secs, (b.postgresCPU-a.postgresCPU)/secs
}

func (m *capacityMeter) measure(fn func()) written {
	a := snapshot(m.t, m.conn, m.schema, m.postmaster)
	fn()
	time.Sleep(2 * time.Second) // table counters are flushed within a second of a transaction
	b := snapshot(m.t, m.conn, m.schema, m.postmaster)
	secs := b.at.Sub(a.at).Seconds()
	return written{wal: walDiff(m.t, m.conn, a.wal, b.wal) - m.bgWAL*secs,
		ins: float64(b.ins - a.ins), upd: float64(b.upd - a.upd), del: float64(b.del - a.del), hot: float64(b.hot - a.hot),
		commits: float64(b.commits - a.commits), cpu: (b.postgresCPU-a.postgresCPU)/secs - m.bgCPU}
}

func (m *capacityMeter) listID() string {
	var id string
	require.NoError(m.t, m.conn.QueryRow(context.Background(), `SELECT id::text FROM list ORDER BY created_at DESC LIMIT 1`).Scan(&id))
	return id
}

// storage is the bytes of every table and index of the schema.
func (m *capacityMeter) storage() float64 {
	var b float64
	require.NoError(m.t, m.conn.QueryRow(context.Background(), `
		SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables WHERE schemaname = $1`, m.schema).Scan(&b))
	return b
}

// storageByTable is the largest tables' bytes per domain.
func (m *capacityMeter) storageByTable(n int) string {
	rows, err := m.conn.Query(context.Background(), `
		SELECT relname, pg_total_relation_size(relid) FROM pg_stat_user_tables WHERE schemaname = $1
		ORDER BY 2 DESC LIMIT 5`, m.schema)
	require.NoError(m.t, err)
	var parts []string
	for rows.Next() {
		var name string
		var size float64
		require.NoError(m.t, rows.Scan(&name, &size))
		parts = append(parts, fmt.Sprintf("%s %.0f", name, size/float64(n)))
	}
	require.NoError(m.t, rows.Err())
	return strings.Join(parts, ", ")
}

// startCounted starts a role in this process with its statements counted.
func (e *e2e) startCounted(role string, count *counter) *Main {
	e.t.Helper()
	cfg, err := LoadConfig(e.environ())
	require.NoError(e.t, err)
	m := NewMain(cfg, role, slog.New(slog.DiscardHandler))
	m.TestOnly, m.QueryTracer = true, count
	require.NoError(e.t, m.Run(context.Background()))
	e.mains = append(e.mains, m)
	if m.runsAPI() && e.api == nil {
		e.api = m
	}
	return m
}

func snapshot(t *testing.T, conn *pgx.Conn, schema string, postmaster int) pgSnapshot {
	t.Helper()
	s := pgSnapshot{at: time.Now(), postgresCPU: postgresCPUSeconds(postmaster)}
	ctx := context.Background()
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s.wal))
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint,
		       coalesce(sum(n_tup_del), 0)::bigint, coalesce(sum(n_tup_hot_upd), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = $1`, schema).Scan(&s.ins, &s.upd, &s.del, &s.hot))
	require.NoError(t, conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits))
	return s
}

func walDiff(t *testing.T, conn *pgx.Conn, from, to string) float64 {
	var d float64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)`, to, from).Scan(&d))
	return d
}

// postmasterPID is the pid of the cluster's postmaster (its data
// directory's postmaster.pid).
func postmasterPID(t *testing.T, conn *pgx.Conn) int {
	var dir string
	require.NoError(t, conn.QueryRow(context.Background(), `SHOW data_directory`).Scan(&dir))
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	require.NoError(t, err)
	return pid
}

// postgresCPUSeconds is the CPU time (user and system) of a cluster so far:
// its postmaster and the processes it started, from /proc. A backend that
// ended took its time with it (the pools keep theirs open).
func postgresCPUSeconds(postmaster int) float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		// The fields after the command's closing parenthesis: the parent is
		// the 2nd, utime and stime the 12th and 13th.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) <= 12 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != postmaster && ppid != postmaster {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		total += (u + s) / 100 // clock ticks (USER_HZ = 100)
	}
	return total
}
