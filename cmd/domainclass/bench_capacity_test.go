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
	"github.com/domainclass/domainclass/httpapi/client"
)

// The capacity section (docs/operating.md, "Capacity"): what Postgres
// writes per answered domain — statements, rows, WAL bytes — when a list
// drains through an instant model with no rate limit, so that the
// database and this machine's CPU are all that bound it; and the
// domains/s they allow. Knob: BENCH_CAPACITY_DOMAINS (default 20000).
//
// WAL is the cluster's (pg_current_wal_lsn), less what it wrote in as
// long before the drain with nothing of ours running: run it on a quiet
// machine. Rows are this schema's tables' own counters; statements are
// counted by the processes' pools.

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
	e := newE2E(t, llmtest.Steady(true, 4, "x", 0), map[string]string{
		"AUTH": "on", "LOG_LEVEL": "error", "LLM_MAX_CONCURRENCY": "64", "LLM_RATE_PER_MINUTE": "10000000",
		"LIST_DOMAIN_CONCURRENCY": "32",
	})
	count := &counter{}
	api := e.startCounted(RoleAPI, count)
	c := client.New(api.APIURL(), e.apiKey("capacity"))
	var body strings.Builder
	body.WriteString("domain\n")
	for i := range n {
		fmt.Fprintf(&body, "cap%07d.com\n", i)
	}
	acc, err := c.UploadList(context.Background(), func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(body.String())), nil
	}, client.ListOptions{ContentType: client.ListCSV})
	require.NoError(t, err)

	conn, err := pgx.Connect(context.Background(), e.env["DATABASE_URL"])
	require.NoError(t, err)
	defer conn.Close(context.Background())
	time.Sleep(2 * time.Second) // the counters of the upload's last transactions settle
	idle0 := snapshot(t, conn, e.schema)
	time.Sleep(10 * time.Second) // the cluster's own writes, with nothing of ours running
	idle1 := snapshot(t, conn, e.schema)

	count.n.Store(0)
	before := snapshot(t, conn, e.schema)
	e.startCounted(RoleWorker, count)
	_, err = c.WaitList(context.Background(), acc.ListID, 100*time.Millisecond, nil)
	require.NoError(t, err)
	elapsed := time.Since(before.at)
	statements := count.n.Load()
	time.Sleep(2 * time.Second) // table counters are flushed within a second of a transaction
	after := snapshot(t, conn, e.schema)

	background := walDiff(t, conn, idle0.wal, idle1.wal) / idle1.at.Sub(idle0.at).Seconds()
	wal := walDiff(t, conn, before.wal, after.wal) - background*after.at.Sub(before.at).Seconds()
	rows := (after.ins - before.ins) + (after.upd - before.upd) + (after.del - before.del)
	per := func(v float64) float64 { return v / float64(n) }
	rate := float64(n) / elapsed.Seconds()
	cpu := (after.postgresCPU - before.postgresCPU) / elapsed.Seconds()
	section := "capacity"
	return []benchRow{
		{section, fmt.Sprintf("a %d-domain list drained by one worker, instant model, no rate limit: domains/s", n),
			fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("Postgres used %.2f of 2 cores meanwhile", cpu), "-", "-"},
		{section, "  statements per answered domain (every pool: api and worker)", fmt.Sprintf("%.1f", per(float64(statements))),
			fmt.Sprintf("%d statements; %.2f commits a domain", statements, per(float64(after.commits-before.commits))), "-", "-"},
		{section, "  rows written per answered domain (this schema's tables)", fmt.Sprintf("%.1f", per(float64(rows))),
			fmt.Sprintf("inserted %.1f, updated %.1f (HOT %.1f), deleted %.1f", per(float64(after.ins-before.ins)),
				per(float64(after.upd-before.upd)), per(float64(after.hot-before.hot)), per(float64(after.del-before.del))), "-", "-"},
		{section, "  WAL bytes per answered domain", fmt.Sprintf("%.0f B", per(wal)),
			fmt.Sprintf("%.1f MiB in %s, less the cluster's own %.0f kB/s", wal/(1<<20), elapsed.Round(time.Second), background/1024), "-", "-"},
	}
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

func snapshot(t *testing.T, conn *pgx.Conn, schema string) pgSnapshot {
	t.Helper()
	s := pgSnapshot{at: time.Now(), postgresCPU: postgresCPUSeconds()}
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

// postgresCPUSeconds is the CPU time of every postgres process on this
// machine so far (user and system), from /proc.
func postgresCPUSeconds() float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, dir := range dirs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres") {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			total += (u + s) / 100 // clock ticks (USER_HZ = 100)
		}
	}
	return total
}
