//go:build bench

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/client"
)

// A list's status poller in a process of its own: the bench process also
// serves the fake model and search (160 calls a second in the `all` row),
// and a poller sharing its Go scheduler measured that load as well as the
// API's answers. The child (this test binary, BENCH_POLL_URL set) polls
// with the callers' client 50 times a second until its stdin closes, then
// writes one line per answer: its latency in nanoseconds, and the retries
// the client was told to make (503s) as "retry".
func init() {
	base := os.Getenv("BENCH_POLL_URL")
	if base == "" {
		return
	}
	c := client.New(base, os.Getenv("BENCH_POLL_KEY"))
	id := os.Getenv("BENCH_POLL_LIST")
	out := bufio.NewWriter(os.Stdout)
	retries := 0
	c.OnRetry = func(string, time.Duration) { retries++ }
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	tick := time.NewTicker(20 * time.Millisecond)
	for {
		select {
		case <-stop:
			for range retries {
				fmt.Fprintln(out, "retry")
			}
			_ = out.Flush()
			os.Exit(0)
		case <-tick.C:
		}
		start := time.Now()
		if _, err := c.List(context.Background(), id); err != nil {
			fmt.Fprintln(os.Stderr, "poller:", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, time.Since(start).Nanoseconds())
	}
}

// poller is a running poller child.
type poller struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
}

// startPoller starts a poller child on list id of the API at base, as key.
func startPoller(t *testing.T, base, key, id string) *poller {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BENCH_POLL_URL="+base, "BENCH_POLL_KEY="+key, "BENCH_POLL_LIST="+id)
	cmd.Stderr = t.Output()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &poller{cmd: cmd, stdin: stdin, stdout: stdout}
}

// stop ends the poller and returns its answers' latencies and the retries
// its client was told to make.
func (p *poller) stop(t *testing.T) (lat []time.Duration, retries int) {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	b, err := io.ReadAll(p.stdout)
	require.NoError(t, err)
	require.NoError(t, p.cmd.Wait(), "the poller failed")
	for _, line := range strings.Fields(string(b)) {
		if line == "retry" {
			retries++
			continue
		}
		ns, err := strconv.ParseInt(line, 10, 64)
		require.NoError(t, err)
		lat = append(lat, time.Duration(ns))
	}
	return lat, retries
}
