package dbtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Patience is how long a test waits for something that must happen (a job
// to end, a count to reach its value, a server to be ready) before it calls
// the wait stuck. It is never a measure of speed: a machine busy with other
// work (a load average of 30 on two cores was seen) takes many times longer
// than a quiet one, so it is generous. TEST_PATIENCE (a Go duration)
// changes it. A test that asserts on a rate, a window or a timeout moves a
// clock of its own instead of waiting on this one.
func Patience() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("TEST_PATIENCE")); err == nil && d > 0 {
		return d
	}
	return defaultPatience
}

// defaultPatience: ten times the longest wait seen on a quiet machine
// (about 10 s for a job through two worker processes), and well inside a
// package's -timeout (go tool task test sets 60m).
const defaultPatience = 3 * time.Minute

// The time budgets of the external tools some tests run. Each is about
// ten times what the tool takes on a quiet two-core machine, so that it
// holds on a busy one; when one runs out, the failure names the tool.
const (
	// BudgetImage: `go tool task image` compiles the static binary (three
	// minutes cold, on two quiet cores) and podman builds the image.
	BudgetImage = 40 * time.Minute
	// BudgetTool: a linter, a generator or a compiler of test fixtures
	// (promtool, redocly, openapi-typescript, tsc, oapi-codegen): seconds
	// when quiet.
	BudgetTool = 10 * time.Minute
	// BudgetServer: a real server started for a test (Prometheus, Chromium)
	// becoming ready: a second or two when quiet.
	BudgetServer = 3 * time.Minute
)

// RunTool runs cmd, not yet started, within budget and returns what it
// wrote to stdout and stderr. When the budget runs out, cmd and every
// process it started are killed and the error names the tool, the budget
// and the machine's load, so a slow machine is told apart from a broken
// tool.
func RunTool(cmd *exec.Cmd, budget time.Duration) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the tool's children die with it
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.Bytes(), SlowError(strings.Join(cmd.Args, " "), budget, time.Since(start))
	}
}

// SlowError says that tool took longer than its budget, and how busy the
// machine was.
func SlowError(tool string, budget, took time.Duration) error {
	return fmt.Errorf("%s was %w: stopped after %s, beyond its time budget of %s (load average %s); "+
		"a machine this busy needs a larger budget (db/dbtest), or the tool is stuck", tool, ErrSlow,
		took.Round(time.Second), budget, LoadAverage())
}

// ErrSlow is in the chain of an error from RunTool when the budget ran out.
var ErrSlow = errors.New("too slow")

func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
