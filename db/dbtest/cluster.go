package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a PostgreSQL server of a test's own, for tests that stop and
// start Postgres (the shared test cluster must stay up for the others).
type Cluster struct {
	tb     testing.TB
	bindir string
	data   string
	port   int
	// URL connects to its "postgres" database.
	URL string
}

// NewCluster initialises and starts a private cluster on a free loopback
// port; it is stopped and removed when the test ends. It takes a second or
// two. As root the server runs as the postgres user, as it refuses root.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bindir, err := pgBindir()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "domainclass-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Cluster{tb: tb, bindir: bindir, data: filepath.Join(dir, "data"), port: freePort(tb)}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	c.run("initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	c.Start()
	tb.Cleanup(func() { c.pgctl("stop", "-m", "immediate") })
	return c
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.tb.Helper()
	c.pgctl("start", "-w", "-t", "30", "-l", filepath.Join(filepath.Dir(c.data), "server.log"),
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c fsync=off", c.port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), c.URL)
		if err == nil {
			_ = conn.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("cluster did not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server (fast shutdown: connections are cut).
func (c *Cluster) Stop() {
	c.tb.Helper()
	c.pgctl("stop", "-w", "-m", "fast")
}

// Crash stops the server the way a crash does (immediate shutdown: no
// checkpoint, connections dropped without a goodbye); the next Start runs
// crash recovery.
func (c *Cluster) Crash() {
	c.tb.Helper()
	c.pgctl("stop", "-w", "-m", "immediate")
}

func (c *Cluster) pgctl(args ...string) {
	c.run("pg_ctl", append([]string{"-D", c.data}, args...)...)
}

func (c *Cluster) run(name string, args ...string) {
	c.tb.Helper()
	bin := filepath.Join(c.bindir, name)
	var cmd *exec.Cmd
	if os.Getuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.tb.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func pgBindir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries found (run `go tool task test`, which installs them, or set PG_BINDIR)")
}

func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
