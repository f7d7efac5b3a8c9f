//go:build drills

package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

// The list drills: a worker killed mid-list, Postgres restarted during an
// upload, and Postgres restarted while a list drains.

// uploadList posts a list body (gzip) to the deployment's API.
func (d *deployment) uploadList(body io.Reader) (int, wire.ListAccepted, error) {
	return d.uploadListTo("/lists", body)
}

// uploadListTo posts a list body (gzip) to path (with its query).
func (d *deployment) uploadListTo(path string, body io.Reader) (int, wire.ListAccepted, error) {
	req, err := http.NewRequest(http.MethodPost, d.api.URL+path, body)
	if err != nil {
		return 0, wire.ListAccepted{}, err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Content-Encoding", "gzip")
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return 0, wire.ListAccepted{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a wire.ListAccepted
	if resp.StatusCode == http.StatusAccepted {
		if err := json.Unmarshal(b, &a); err != nil {
			return resp.StatusCode, a, err
		}
	}
	return resp.StatusCode, a, nil
}

// listStatus reads a list through the API.
func (d *deployment) listStatus(id string) (wire.ListStatus, bool) {
	var s wire.ListStatus
	resp, err := d.client.Get(d.api.URL + "/lists/" + id)
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	return s, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&s) == nil
}

func gzipList(domains []string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for _, d := range domains {
		fmt.Fprintln(zw, d)
	}
	_ = zw.Close()
	return buf.Bytes()
}

// killDrillList is the list of the kill drills: rows domains named after
// prefix, the last 300 of them repeating earlier ones.
func killDrillList(prefix string, rows int) (domains []string, distinct map[string]bool) {
	distinct = map[string]bool{}
	for i := range rows {
		domain := fmt.Sprintf("%s%04d.com", prefix, (i*7)%(rows-300))
		domains = append(domains, domain)
		distinct[domain] = true
	}
	return domains, distinct
}

// waitListCompleted waits up to 5 minutes for list id to be COMPLETED, and
// reports whether it was.
func (d *deployment) waitListCompleted(id string) bool {
	return eventually(5*time.Minute, func() bool {
		l, ok := d.listStatus(id)
		return ok && l.Status == "COMPLETED"
	})
}

// listOutcomes reads what a list's rows became, by status.
func (d *deployment) listOutcomes(id string) map[string]int {
	out := map[string]int{}
	for _, status := range []string{"PENDING", "COMPLETED", "FAILED", "REJECTED"} {
		if n := d.count(fmt.Sprintf(`SELECT count(*) FROM list_row WHERE list_id = '%s' AND status = '%s'`, id, status)); n != 0 {
			out[status] = n
		}
	}
	return out
}

// drillListWorkerKilled: a worker process is killed with SIGKILL while it
// drains a list; another one starts. The rescued chunk jobs skip every row
// whose answer was stored, and the list completes.
func drillListWorkerKilled(t *testing.T, s *drillSet) {
	const (
		drill   = "worker kill -9 mid-list"
		rows    = 3000
		latency = 100 * time.Millisecond
	)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", latency))
	settings := map[string]string{"JOB_TIMEOUT": "10s", "RESCUE_STUCK_AFTER": "10s", "CLAIM_WAIT": "3s"}
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), settings)
	d.start(cli.RoleAPI)
	first := d.start(cli.RoleWorker)

	domains, distinct := killDrillList("listkill", rows)
	status, a, err := d.uploadList(bytes.NewReader(gzipList(domains)))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)

	require.True(t, eventually(2*time.Minute, func() bool {
		l, ok := d.listStatus(a.ListID)
		return ok && l.Progress.Done >= rows/4
	}), "a quarter of the rows were not answered within two minutes")
	inFlight := fake.InFlight()
	first.kill()
	killedAt := time.Now()
	atKill, _ := d.listStatus(a.ListID)
	askedBefore := fake.Domains()
	stored := d.storedDomains()
	var lost []string
	for domain := range askedBefore {
		if !stored[domain] {
			lost = append(lost, domain)
		}
	}
	slices.Sort(lost)

	d.start(cli.RoleWorker)
	completed := d.waitListCompleted(a.ListID)
	recovery := time.Since(killedAt)
	end, _ := d.listStatus(a.ListID)
	outcomes := d.listOutcomes(a.ListID)

	calls := fake.Domains()
	var total, beforeBad, lostAgain, othersBad int
	for domain := range distinct {
		n := calls[domain]
		total += n
		switch {
		case stored[domain] && n != 1:
			beforeBad++
		case slices.Contains(lost, domain) && n == 2:
			lostAgain++
		case !stored[domain] && !slices.Contains(lost, domain) && n != 1:
			othersBad++
		}
	}
	s.check(t, drill, "list COMPLETED; rows COMPLETED (DB)", "every row", completed && outcomes["COMPLETED"] == rows,
		"%s; %d of %d rows COMPLETED (%v)", end.Status, outcomes["COMPLETED"], rows, outcomes)
	s.figure(drill, "at the kill", "%d of %d rows done, %d model calls in flight, %d answers stored",
		atKill.Progress.Done, rows, inFlight, len(stored))
	s.check(t, drill, "LLM calls per domain answered before the kill", "exactly 1", beforeBad == 0,
		"%d domains, %d asked again", len(stored), beforeBad)
	s.check(t, drill, "domains asked but not stored at the kill", "asked again once (the answer died with the process)",
		lostAgain == len(lost), "%d, of which %d asked exactly twice", len(lost), lostAgain)
	s.check(t, drill, "LLM calls per distinct domain overall", "1 + (asked, not stored) / distinct",
		othersBad == 0 && total == len(distinct)+len(lost), "%s (%d calls for %d domains in %d rows)",
		ratio(total, len(distinct)), total, len(distinct), rows)
	missing, answers := d.withoutProvenance()
	s.check(t, drill, "model answers without their provenance", "none (written in the answer's own batch)",
		missing == 0 && answers > 0, "%d of %d", missing, answers)
	s.figure(drill, "kill → list COMPLETED", "%s (JOB_TIMEOUT=10s, RESCUE_STUCK_AFTER=10s; LLM %s a call)",
		recovery.Round(100*time.Millisecond), latency)
}

// drillEconomyWorkerKilled: a worker process is killed with SIGKILL while
// an economy list's batches run at the provider; another one starts, and
// the provider then finishes them. The new worker follows the same
// batches: none is submitted again, no domain is asked twice, and the list
// completes.
func drillEconomyWorkerKilled(t *testing.T, s *drillSet) {
	const (
		drill    = "worker kill -9 while batches run"
		rows     = 3000
		perBatch = 1000
	)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "Makes packaged food.", 0))
	hold := make(chan struct{})
	fake.Batch.Hold = hold
	settings := map[string]string{"JOB_TIMEOUT": "10s", "RESCUE_STUCK_AFTER": "10s",
		"BATCH_MAX_REQUESTS": fmt.Sprint(perBatch), "BATCH_POLL_INTERVAL": "500ms"}
	d := newDeployment(t, s.bin, fake, dbtest.URL(), dbtest.Schema(t), settings)
	d.start(cli.RoleAPI)
	first := d.start(cli.RoleWorker)

	domains, distinct := killDrillList("econkill", rows)
	status, a, err := d.uploadListTo("/lists?tier=economy", bytes.NewReader(gzipList(domains)))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)

	inProgress := func() int {
		n := 0
		for _, st := range fake.BatchStatuses() {
			if st == "in_progress" {
				n++
			}
		}
		return n
	}
	require.True(t, eventually(2*time.Minute, func() bool { return inProgress() == rows/perBatch }),
		"the batches were not all in progress within two minutes: %v", fake.BatchStatuses())
	runningAtKill := d.count(`SELECT count(*) FROM river_job WHERE kind = 'llm_batch' AND state = 'running'`)
	first.kill()
	killedAt := time.Now()
	atKill, _ := d.listStatus(a.ListID)
	heldAtKill := inProgress()
	d.start(cli.RoleWorker)
	close(hold)
	completed := d.waitListCompleted(a.ListID)
	recovery := time.Since(killedAt)
	end, _ := d.listStatus(a.ListID)
	outcomes := d.listOutcomes(a.ListID)

	batches, lines := fake.Batches()
	requests, calls, twice := 0, 0, 0
	for domain, n := range fake.Domains() {
		if distinct[domain] {
			requests += n
			if n > 1 {
				twice++
			}
		}
	}
	for _, r := range fake.Requests() {
		if r.Batch == "" {
			calls++
		}
	}
	s.check(t, drill, "list COMPLETED; rows COMPLETED (DB)", "every row", completed && outcomes["COMPLETED"] == rows,
		"%s; %d of %d rows COMPLETED (%v)", end.Status, outcomes["COMPLETED"], rows, outcomes)
	s.figure(drill, "at the kill", "%d batches in progress at the provider, %d batch jobs running (polling), %d of %d rows done",
		heldAtKill, runningAtKill, atKill.Progress.Done, rows)
	s.check(t, drill, "provider batches created", "one per chunk: none again after the kill", batches == rows/perBatch,
		"%d batches, %d request lines", batches, lines)
	s.check(t, drill, "model requests per distinct domain", "exactly 1", requests == len(distinct) && twice == 0,
		"%s (%d requests, %d of them calls, for %d domains; %d asked twice)", ratio(requests, len(distinct)), requests, calls,
		len(distinct), twice)
	missing, answers := d.withoutProvenance()
	s.check(t, drill, "model answers without their provenance", "none (the batch's requests carry it until stored)",
		missing == 0 && answers > 0, "%d of %d", missing, answers)
	s.figure(drill, "kill → list COMPLETED", "%s (BATCH_POLL_INTERVAL=500ms; the provider finished the batches at the restart)",
		recovery.Round(100*time.Millisecond))
}

// pausingReader sends the first half of a body, says so, and waits to be
// let go before it sends the rest: an upload caught in the middle.
type pausingReader struct {
	r       io.Reader
	half    int
	read    int
	atHalf  chan struct{}
	goOn    chan struct{}
	onceHit sync.Once
}

func (p *pausingReader) Read(b []byte) (int, error) {
	if p.read >= p.half {
		p.onceHit.Do(func() { close(p.atHalf); <-p.goOn })
	} else if p.read+len(b) > p.half {
		b = b[:p.half-p.read]
	}
	n, err := p.r.Read(b)
	p.read += n
	return n, err
}

// drillPostgresDuringUpload: Postgres stops (cleanly, then by a crash) and
// starts again while a 300k-row upload is half sent. The API either
// accepts it whole (202, every row stored) or refuses it and writes
// nothing; once Postgres is back, the next upload is accepted without a
// restart.
func drillPostgresDuringUpload(t *testing.T, s *drillSet) {
	const (
		drill = "Postgres restarted during an upload"
		rows  = 300_000
	)
	cluster := dbtest.NewCluster(t)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "x", 100*time.Millisecond))
	d := newDeployment(t, s.bin, fake, cluster.URL, "", map[string]string{"CALLER_MAX_ACTIVE_LISTS": "10"})
	out, err := d.run("migrate")
	require.NoError(t, err, "domainclass migrate: %s", out)
	d.start(cli.RoleAPI)
	var domains []string
	for i := range rows {
		domains = append(domains, fmt.Sprintf("upload%06d.com", i))
	}
	body := gzipList(domains)

	for _, crash := range []bool{false, true} {
		kind := "clean stop"
		if crash {
			kind = "crash"
		}
		p := &pausingReader{r: bytes.NewReader(body), half: len(body) / 2, atHalf: make(chan struct{}), goOn: make(chan struct{})}
		type result struct {
			status int
			a      wire.ListAccepted
			err    error
		}
		done := make(chan result, 1)
		go func() {
			status, a, err := d.uploadList(p)
			done <- result{status, a, err}
		}()
		<-p.atHalf
		if crash {
			cluster.Crash()
		} else {
			cluster.Stop()
		}
		cluster.Start()
		close(p.goOn)
		r := <-done
		lists := d.count(`SELECT count(*) FROM list WHERE rows = 300000`)
		var stored int
		if r.status == http.StatusAccepted {
			stored = d.count(fmt.Sprintf(`SELECT count(*) FROM list_row WHERE list_id = '%s'`, r.a.ListID))
		}
		allRows := d.count(`SELECT count(*) FROM list_row`)
		errText := ""
		if r.err != nil {
			errText = truncateRunes(r.err.Error(), 80)
		}
		whole := r.status == http.StatusAccepted && stored == rows && r.a.Rows == rows
		nothing := r.status != http.StatusAccepted && allRows == d.count(`SELECT coalesce(sum(rows), 0)::int FROM list`)
		s.check(t, drill, "upload answered during a "+kind, "202 with every row, or refused and nothing written",
			whole || nothing, "HTTP %d %s; lists of %d rows: %d; rows of this list stored: %d; rows in all: %d",
			r.status, errText, rows, lists, stored, allRows)
		// The cancel keeps the next run's lists few; the API is back.
		after, a2, err := d.uploadList(bytes.NewReader(gzipList(domains[:1000])))
		s.check(t, drill, "next upload after the "+kind, "202 without a restart", err == nil && after == http.StatusAccepted,
			"HTTP %d, %d rows", after, a2.Rows)
	}
}

// drillPostgresWhileListDrains: Postgres restarts while a worker drains a
// list; the list completes with every row answered.
func drillPostgresWhileListDrains(t *testing.T, s *drillSet) {
	const (
		drill   = "Postgres restarted while a list drains"
		rows    = 2000
		latency = 100 * time.Millisecond
	)
	cluster := dbtest.NewCluster(t)
	fake := llmtest.New(t, llmtest.Steady(true, 4, "x", latency))
	d := newDeployment(t, s.bin, fake, cluster.URL, "", nil)
	out, err := d.run("migrate")
	require.NoError(t, err, "domainclass migrate: %s", out)
	d.start(cli.RoleAPI)
	d.start(cli.RoleWorker)
	var domains []string
	for i := range rows {
		domains = append(domains, fmt.Sprintf("drain%05d.com", i))
	}
	status, a, err := d.uploadList(bytes.NewReader(gzipList(domains)))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)
	require.True(t, eventually(2*time.Minute, func() bool {
		l, ok := d.listStatus(a.ListID)
		return ok && l.Progress.Done >= rows/4
	}), "a quarter of the rows were not answered within two minutes")
	atStop, _ := d.listStatus(a.ListID)
	stopAt := time.Now()
	cluster.Stop()
	cluster.Start()
	down := time.Since(stopAt)
	completed := d.waitListCompleted(a.ListID)
	recovery := time.Since(stopAt)
	outcomes := d.listOutcomes(a.ListID)
	calls := fake.Total()
	retried := d.count(`SELECT count(*) FROM river_job WHERE kind = 'classify_list' AND cardinality(errors) > 0`)
	s.check(t, drill, "list COMPLETED; rows COMPLETED (DB)", "every row", completed && outcomes["COMPLETED"] == rows,
		"%d of %d (%v)", outcomes["COMPLETED"], rows, outcomes)
	s.figure(drill, "at the stop; Postgres down", "%d of %d rows done; %s", atStop.Progress.Done, rows, down.Round(100*time.Millisecond))
	s.figure(drill, "LLM calls per domain", "%s (%d calls for %d domains: an answer that met the outage is stored once it is back); %d chunk jobs retried",
		ratio(calls, rows), calls, rows, retried)
	s.figure(drill, "stop → list COMPLETED", "%s", recovery.Round(100*time.Millisecond))
}
