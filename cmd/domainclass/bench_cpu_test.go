//go:build bench

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuWaits is where a process's time went while the machine's CPUs were
// shared: what the kernel says the process's threads ran and waited on
// the run queue (/proc/PID/task/*/schedstat), how busy the machine was
// (/proc/stat), and how long the process's goroutines were runnable
// before Go ran them (go_sched_latencies_seconds).
type cpuWaits struct {
	at                        time.Time
	ran, queued               time.Duration // the process's threads
	machineBusy, machineAll   float64       // jiffies, every CPU
	gAll, gWithin1, gWithin10 float64       // goroutine scheduling latencies
	cpuSome, ioSome           time.Duration // the machine's pressure stall totals
}

func readCPUWaits(t *testing.T, p *process) cpuWaits {
	t.Helper()
	w := cpuWaits{at: time.Now()}
	w.ran, w.queued = threadTimes(p.Process.Pid)
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n") // cpu user nice system idle iowait irq softirq steal
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			w.machineAll += v
			if i != 3 && i != 4 {
				w.machineBusy += v
			}
		}
	}
	w.cpuSome, w.ioSome = stalled("cpu"), stalled("io")
	const name = "go_sched_latencies_seconds"
	for _, line := range metricLines(t, p.URL) {
		series, value, ok := strings.Cut(line, " ")
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			continue
		}
		if strings.HasPrefix(series, name+"_count") {
			w.gAll = v
			continue
		}
		le, ok := strings.CutPrefix(series, name+`_bucket{le="`)
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64)
		switch {
		case err != nil:
		case bound <= 0.001: // the runtime's buckets: the last one under 1 ms is 0.92 ms
			w.gWithin1 = v
		case bound <= 0.011: // and 10.5 ms
			w.gWithin10 = v
		}
	}
	return w
}

// threadTimes is how long the threads of process pid have run and
// waited on the run queue for a CPU, as the kernel counts them.
func threadTimes(pid int) (ran, queued time.Duration) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if fs := strings.Fields(string(b)); len(fs) >= 2 {
			r, _ := strconv.ParseInt(fs[0], 10, 64)
			q, _ := strconv.ParseInt(fs[1], 10, 64)
			ran += time.Duration(r)
			queued += time.Duration(q)
		}
	}
	return ran, queued
}

// stalled is the time some task of the machine waited for resource
// ("cpu", "io"), from its pressure stall information (0 where the kernel
// does not keep it).
func stalled(resource string) time.Duration {
	b, err := os.ReadFile("/proc/pressure/" + resource)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n") // some avg10=… avg60=… avg300=… total=µs
	_, total, _ := strings.Cut(line, "total=")
	us, _ := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	return time.Duration(us) * time.Microsecond
}

// since says, for the time from before to w: how busy the machine's CPUs
// were and how much of the time some task waited for a CPU and for I/O,
// how many CPUs the process used and how long its threads waited for one
// per second they ran, and the share of its goroutines runnable over
// 0.9 ms and over 10.5 ms before they ran.
func (w cpuWaits) since(before cpuWaits) string {
	busy := (w.machineBusy - before.machineBusy) / (w.machineAll - before.machineAll)
	ran, queued := w.ran-before.ran, w.queued-before.queued
	g := w.gAll - before.gAll
	secs := w.at.Sub(before.at).Seconds()
	return fmt.Sprintf("CPUs %.0f%% busy, some task waiting for a CPU %.0f%% of the time, for I/O %.0f%%; the process ran %.2f CPUs and its threads waited %.2f s per s run; goroutines runnable > 0.9 ms %.2f%%, > 10.5 ms %.3f%%",
		100*busy, 100*(w.cpuSome-before.cpuSome).Seconds()/secs, 100*(w.ioSome-before.ioSome).Seconds()/secs,
		ran.Seconds()/secs, queued.Seconds()/ran.Seconds(),
		100*(g-(w.gWithin1-before.gWithin1))/g, 100*(g-(w.gWithin10-before.gWithin10))/g)
}
