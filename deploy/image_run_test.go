package deploy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
)

// startsEveryRole runs the image as a container runtime would, without one
// (this sandbox cannot run containers): it exports the filesystem of a
// container made from the image and runs the image's entrypoint in it
// (chroot), as the image's user, with the image's environment and nothing
// else — no shell, no /tmp unless the image ships one — against a fresh
// schema of the test database. Only the addresses are overridden, to free
// loopback ports. `migrate` applies every migration and exits 0; `api`
// answers /readyz, `worker` /healthz and /readyz; each exits 0 on SIGTERM.
func startsEveryRole(t *testing.T, podman, image string, c imageConfig) {
	if os.Geteuid() != 0 {
		t.Skip("running the image's filesystem needs chroot, which needs root; `go tool task test` as root runs it")
	}
	root := exportImage(t, podman, image)
	uid, gid := parseUser(t, c.User)
	schema := freshSchema(t)
	env := append(slices.Clone(c.Env),
		"DATABASE_URL="+dbtest.URL(), "DATABASE_SCHEMA="+schema,
		"HTTP_ADDR=127.0.0.1:0", "WORKER_ADDR=127.0.0.1:0")
	run := func(args ...string) *imageProcess {
		argv := append(slices.Clone(c.Entrypoint), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Dir = cmp.Or(c.WorkingDir, "/")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
		}
		return startImageProcess(t, cmd)
	}

	migrate := run("migrate")
	require.Equal(t, 0, migrate.wait(t), "migrate in the image:\n%s", migrate.output())
	require.Contains(t, migrate.output(), "migrate: applied app migration")

	api := run(c.Cmd...) // the image's default command is the api
	apiURL := api.serving(t, "API")
	requireStatus(t, apiURL+"/readyz", http.StatusOK)

	worker := run("worker")
	workerURL := worker.serving(t, "health and metrics")
	requireStatus(t, workerURL+"/healthz", http.StatusOK)
	requireStatus(t, workerURL+"/readyz", http.StatusOK)

	for role, p := range map[string]*imageProcess{"api": api, "worker": worker} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, p.wait(t), "%s stopped by SIGTERM:\n%s", role, p.output())
	}
}

// exportImage returns a directory holding the filesystem of a container
// made from image: what `podman run` would start in, less what the runtime
// mounts (/proc, /dev, /etc/hosts, ...).
func exportImage(t *testing.T, podman, image string) string {
	dir := t.TempDir()
	name := fmt.Sprintf("domainclass-test-%08x", rand.Uint32())
	out, err := dbtest.RunTool(exec.Command(podman, "create", "--name", name, image), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command(podman, "rm", "--force", name).Run() })
	archive := filepath.Join(dir, "rootfs.tar")
	out, err = dbtest.RunTool(exec.Command(podman, "export", "-o", archive, name), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	root := filepath.Join(dir, "root")
	require.NoError(t, os.Mkdir(root, 0o755))
	out, err = dbtest.RunTool(exec.Command("tar", "--numeric-owner", "--same-permissions", "-xf", archive, "-C", root), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.Chmod(root, 0o755)) // a container's / is open to its user
	return root
}

// parseUser reads the image's USER, numeric as it must be in an image with
// no /etc/passwd.
func parseUser(t *testing.T, user string) (uid, gid uint32) {
	u, g, ok := strings.Cut(user, ":")
	require.True(t, ok, "USER %q: uid:gid", user)
	un, err := strconv.ParseUint(u, 10, 32)
	require.NoError(t, err, "USER %q", user)
	gn, err := strconv.ParseUint(g, 10, 32)
	require.NoError(t, err, "USER %q", user)
	return uint32(un), uint32(gn)
}

// freshSchema creates an empty schema of the test database for migrate to
// fill, dropped when the test ends.
func freshSchema(t *testing.T) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	schema := fmt.Sprintf("image_test_%08x", rand.Uint32())
	ident := pgx.Identifier{schema}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+ident)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+ident+" CASCADE")
		_ = conn.Close(ctx)
	})
	return schema
}

// imageProcess is a command of the image, running.
type imageProcess struct {
	cmd   *exec.Cmd
	lines chan string // stdout, line by line
	done  chan struct{}
	mu    sync.Mutex
	out   bytes.Buffer // stdout and stderr, for failure messages
}

func startImageProcess(t *testing.T, cmd *exec.Cmd) *imageProcess {
	p := &imageProcess{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = writerFunc(func(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) })
	require.NoError(t, cmd.Start(), "starting %s in the image", strings.Join(cmd.Args, " "))
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- s.Text():
			default:
			}
		}
		close(p.lines)
		_ = cmd.Wait() // after the last read: Wait closes the pipe
		close(p.done)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

// serving returns the URL the process says it serves what on, once it says so.
func (p *imageProcess) serving(t *testing.T, what string) string {
	deadline := time.After(dbtest.Patience())
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s exited (%d) before serving %s:\n%s", strings.Join(p.cmd.Args, " "), p.cmd.ProcessState.ExitCode(), what, p.output())
			}
			if _, url, found := strings.Cut(line, ": "+what+" on "); found {
				return url
			}
		case <-deadline:
			t.Fatalf("%s did not serve %s within %s:\n%s", strings.Join(p.cmd.Args, " "), what, dbtest.Patience(), p.output())
		}
	}
}

// wait returns the process's exit code once it has exited.
func (p *imageProcess) wait(t *testing.T) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(dbtest.Patience()):
		t.Fatalf("%s did not exit within %s:\n%s", strings.Join(p.cmd.Args, " "), dbtest.Patience(), p.output())
		return -1
	}
}

func (p *imageProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// requireStatus polls url until it answers want.
func requireStatus(t *testing.T, url string, want int) {
	deadline := time.Now().Add(dbtest.Patience())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		last := ""
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: want %d within %s, last: %s", url, want, dbtest.Patience(), last)
		}
		<-tick.C
	}
}
