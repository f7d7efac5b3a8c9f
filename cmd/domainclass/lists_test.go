package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

var progressLineRe = regexp.MustCompile(`^progress: (\d+)/(\d+) rows done(, [0-9.]+ rows/s(, (about (\d+h\d\dm|\d+m(\d\ds)?|\d+s)|under a second) left)?)?$`)

// requireProgressLines checks the progress lines of a list of rows rows:
// one per change, counts going up, the last one all done.
func requireProgressLines(t *testing.T, errOut string, rows int) {
	t.Helper()
	last := -1
	for _, line := range strings.Split(errOut, "\n") {
		if !strings.HasPrefix(line, "progress: ") {
			continue
		}
		m := progressLineRe.FindStringSubmatch(line)
		require.NotNil(t, m, "a progress line: %q", line)
		done, _ := strconv.Atoi(m[1])
		require.Equal(t, strconv.Itoa(rows), m[2], line)
		require.Greater(t, done, last, "one line per change: %q", line)
		last = done
	}
	require.Equal(t, rows, last, "the last progress line has every row done:\n%s", errOut)
}

func readCSVFile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	return records
}

// listStatus reads a list's status through the API.
func (e *e2e) listStatus(id string) wire.ListStatus {
	e.t.Helper()
	resp, err := http.Get(e.api.APIURL() + "/lists/" + id)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(e.t, http.StatusOK, resp.StatusCode, "%s", b)
	var s wire.ListStatus
	require.NoError(e.t, json.Unmarshal(b, &s))
	return s
}

// currentPrompt is the cpg classifier's current prompt version: the one
// every fresh answer records.
func (e *e2e) currentPrompt() string {
	e.t.Helper()
	c, err := classifier.DefaultRegistry().Get("cpg")
	require.NoError(e.t, err)
	return c.CurrentPrompt
}

func (e *e2e) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.api.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// waitList polls the list until it has the given status.
func (e *e2e) waitList(id string, status string) wire.ListStatus {
	e.t.Helper()
	var s wire.ListStatus
	require.Eventually(e.t, func() bool {
		s = e.listStatus(id)
		return string(s.Status) == status
	}, dbtest.Patience(), 25*time.Millisecond, "list %s: want %s, last seen %+v", id, status, s)
	return s
}

// listIDOf finds the list id in submit's stderr.
func listIDOf(t *testing.T, errOut string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^list (\S+): \d+ rows`).FindStringSubmatch(errOut)
	require.NotNil(t, m, "no list line in:\n%s", errOut)
	return m[1]
}

func TestSubmitList(t *testing.T) {
	t.Parallel()

	t.Run("DryRunPrintsTheEstimateAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		e.start(cli.RoleAll)
		known := filepath.Join(t.TempDir(), "known.csv")
		require.NoError(t, os.WriteFile(known, []byte("name,domain\nUnilever,unilever.com\n"), 0o600))
		code, _, errOut := e.cli(context.Background(), "", nil, "override", "import", known)
		require.Equal(t, 0, code, errOut)

		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		list := "unilever.com\n" + brands(12) + "www.brand00.com\nlocalhost\n"
		code, out, errOut := e.cli(context.Background(), list, client, "submit", "--dry-run", "--file", "-")
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := []string{`rows\s+15`, `domains\s+13`, `duplicates\s+1`, `rejected\s+1`, `overridden\s+1`, `cached\s+0`, `fresh\s+12`,
			`model calls\s+12`, `model\s+test-model`,
			`standard\s+unknown \(no price for model test-model\), (about \S+|under a second)  \(this list\)`,
			`economy\s+unknown \(no price for model test-model\), within 24 hours \(Batch API\)`,
			// What bounds the time, in words, not only in the JSON's basis (issue 36).
			`time basis\s+LLM_MAX_CONCURRENCY=8 bounds the model: .* \(no model call measured yet; assuming 1 s a call\); raise LLM_MAX_CONCURRENCY.*`}
		require.Len(t, lines, len(want), out)
		for i, re := range want {
			require.Regexp(t, "^"+re+"$", lines[i])
		}
		require.Zero(t, e.count("list"), "a dry run writes nothing")
		require.Zero(t, e.llm.Total())

		// Few domains too, and as JSON: --dry-run is always a list.
		code, out, errOut = e.cli(context.Background(), "", client, "submit", "--dry-run", "--json", "unilever.com", "new.com")
		require.Equal(t, 0, code, errOut)
		var est wire.ListEstimate
		require.NoError(t, json.Unmarshal([]byte(out), &est))
		require.Equal(t, wire.ListEstimate{Rows: 2, Domains: 2, Override: 1, LLM: 1, Overridden: 1, Known: 1, Fresh: 1, ModelCalls: 1, Model: "test-model",
			EstimatedSeconds: est.EstimatedSeconds, Tier: "standard", Tiers: map[string]wire.TierEstimate{
				"standard": {EstimatedSeconds: est.EstimatedSeconds}, "economy": {EstimatedSeconds: 24 * 3600}},
			Basis: est.Basis}, est)
		require.False(t, est.Basis.Measured, "no list ran yet: from the configured bounds")
		require.Zero(t, e.count("list"))

		code, _, errOut = e.cli(context.Background(), "", client, "submit", "--dry-run", "--wait", "a.com")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "domainclass: --dry-run only estimates: it sends nothing to wait for\n")
	})

	t.Run("AnEconomyListIsAnsweredByBatchAtHalfTheModelCost", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"OPENAI_MODEL": "gpt-5.4-mini", "BATCH_POLL_INTERVAL": "20ms"})
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		domains := strings.Fields(strings.ReplaceAll(brands(4), "\n", " "))

		code, out, errOut := e.cli(context.Background(), "", client, append([]string{"submit", "--dry-run", "--tier", "economy"}, domains...)...)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^economy\s+\$\S+, within 24 hours \(Batch API\)  \(this list\)$`, out)
		code, out, errOut = e.cli(context.Background(), "", client, append([]string{"submit", "--dry-run", "--json", "--tier", "economy"}, domains...)...)
		require.Equal(t, 0, code, errOut)
		var est wire.ListEstimate
		require.NoError(t, json.Unmarshal([]byte(out), &est))
		require.InDelta(t, 0.5, *est.Tiers["economy"].EstimatedCostUSD / *est.Tiers["standard"].EstimatedCostUSD, 0.001,
			"the economy estimate is half the standard one: %s", out)
		require.Equal(t, est.Tiers["economy"].EstimatedCostUSD, est.EstimatedCostUSD, "the asked tier's on top")

		code, out, errOut = e.cli(context.Background(), "", client, append([]string{"submit", "--list", "--tier", "economy", "--wait"}, domains...)...)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, 5, len(strings.Split(strings.TrimSpace(out), "\n")), "a header and four answers:\n%s", out)
		id := listIDOf(t, errOut)
		batches, requests := e.llm.Batches()
		require.Equal(t, []int{1, 4}, []int{batches, requests}, "one batch of the four fresh domains")
		require.Equal(t, 4, e.llm.Total(), "no call besides the batch's")

		code, out, errOut = e.cli(context.Background(), "", client, "lists", "status", id)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^tier\s+economy$`, out)
		got := e.listStatus(id)
		perDomain := (120*0.375 + 25*2.25) / 1e6 // the fake's usage at gpt-5.4-mini's batch price
		require.InDelta(t, 4*perDomain, got.CostUSD, 1e-9)
		require.Regexp(t, `(?m)^model cost\s+\$0\.0004$`, out)
		page := scrape(t, e.api.APIURL())
		require.InDelta(t, got.CostUSD, metric(t, page, `domainclass_llm_cost_usd_total{tier="economy"}`), 1e-9)
		require.Zero(t, metric(t, page, `domainclass_llm_cost_usd_total{tier="standard"}`))
		require.Equal(t, 4*120.0, metric(t, page, `domainclass_llm_tokens_total{kind="prompt"}`), "a batch's tokens are counted with its answers")
	})

	t.Run("ListOfTwoKeepsABadRowAsRejected", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Soap.") }, nil)
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}

		// Without --wait: the id and where to look.
		code, out, errOut := e.cli(context.Background(), "", client, "submit", "--list", "acme.com", "localhost")
		require.Equal(t, 0, code, errOut)
		id := listIDOf(t, errOut)
		require.Equal(t, id+"\t"+e.api.APIURL()+"/lists/"+id+"\n", out)
		require.Contains(t, errOut, "list "+id+": 2 rows, 1 domains, 0 duplicates, 1 rejected\n"+
			`  row 2 "localhost": localhost is not a company domain`+"\n")
		e.waitList(id, "COMPLETED")

		// With --wait: the CSV on stdout.
		code, out, errOut = e.cli(context.Background(), "", client, "submit", "--list", "--wait", "--poll", "100ms", "acme.com", "localhost")
		require.Equal(t, 0, code, errOut)
		records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 3, out)
		require.Equal(t, wire.ListRowColumns("is_cpg"), records[0])
		require.Equal(t, []string{"1", "acme.com", "", "acme.com", "COMPLETED", "true", "5", "Soap.", "cache"}, records[1][:9])
		require.Equal(t, []string{"test-model", e.currentPrompt(), "", "true"}, records[1][11:],
			"a cached answer's provenance: its model and prompt, no evidence (SEARCH_PROVIDER=none)")
		require.Equal(t, []string{"2", "localhost", "", "", "REJECTED", "", "", "", "", "", "localhost is not a company domain", "", "", "", ""}, records[2])
		require.Zero(t, e.count("classify_job"), "--list sends no job")
		require.Equal(t, 1, e.llm.Total(), "the second list came from the cache")
	})

	t.Run("AListOverTheLimitIsOneClearLine", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"LIST_MAX_BYTES": "1000"})
		e.start(cli.RoleAll)
		var list strings.Builder
		for range 20_000 {
			fmt.Fprintf(&list, "%s.com\n", uuid.NewString()) // compresses badly: the body is sent for a while
		}
		code, out, errOut := e.cli(context.Background(), list.String(), []string{"DOMAINCLASS_URL=" + e.api.APIURL()}, "submit", "--file", "-")
		require.Equal(t, 1, code)
		require.Empty(t, out)
		require.Equal(t, "domainclass: 413 Request Entity Too Large: The list is larger than 1000 bytes (after decompression); split it.\n",
			errOut, "refused at once, not retried as a network error")
		require.Zero(t, e.count("list"))
	})

	t.Run("ACSVExportKeepsItsRefs", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "Snacks.") }, nil)
		e.start(cli.RoleAll)
		var export strings.Builder
		export.WriteString("Company,Domain,Ref\n")
		for i := range 11 {
			fmt.Fprintf(&export, "Brand %d,https://www.brand%02d.com/about,crm-%d\n", i, i, i)
		}
		export.WriteString("Router,10.0.0.1,crm-11\nBrand 0 again,brand00.com,crm-12\n")
		dir := t.TempDir()
		file, answers := filepath.Join(dir, "export.csv"), filepath.Join(dir, "answers.csv")
		require.NoError(t, os.WriteFile(file, []byte(export.String()), 0o600))

		code, out, errOut := e.cli(context.Background(), "", []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
			"submit", "--file", file, "--wait", "--poll", "100ms", "--out", answers)
		require.Equal(t, 0, code, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, ": 13 rows, 11 domains, 1 duplicates, 1 rejected\n", "11 domains in a file are a list")
		requireProgressLines(t, errOut, 13)
		records := readCSVFile(t, answers)
		require.Len(t, records, 14)
		for i, r := range records[1:] {
			require.Equal(t, strconv.Itoa(i+1), r[0])
			require.Equal(t, fmt.Sprintf("crm-%d", i), r[2], "row %d keeps its ref", i+1)
		}
		require.Equal(t, []string{"4", "https://www.brand03.com/about", "crm-3", "brand03.com", "COMPLETED", "true", "4", "Snacks.", "llm"},
			records[4][:9])
		require.Equal(t, []string{"12", "10.0.0.1", "crm-11", "", "REJECTED"}, records[12][:5])
		require.Equal(t, []string{"13", "brand00.com", "crm-12", "brand00.com", "COMPLETED", "true"}, records[13][:6],
			"a duplicate has its first row's answer")
		require.Equal(t, 11, e.llm.Total(), "one model call per distinct domain")
	})
}

func TestLists(t *testing.T) {
	t.Parallel()

	t.Run("StatusAndResultsOfAListThatEnded", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		code, _, errOut := e.cli(context.Background(), "", client, "submit", "--list", "acme.com", "www.acme.com", "10.0.0.1")
		require.Equal(t, 0, code, errOut)
		id := listIDOf(t, errOut)
		e.waitList(id, "COMPLETED")
		page := scrape(t, e.api.APIURL()) // role all: one server, one /metrics
		require.Equal(t, 1.0, metric(t, page, `domainclass_llm_wait_seconds_count{class="list"}`), "a list's call waits as a list's")
		require.Zero(t, metric(t, page, `domainclass_llm_wait_seconds_count{class="interactive"}`))

		code, out, errOut := e.cli(context.Background(), "", client, "lists", "status", id)
		require.Equal(t, 0, code, errOut)
		for _, re := range []string{`(?m)^list\s+` + id + `$`, `(?m)^status\s+COMPLETED$`, `(?m)^classifier\s+cpg$`,
			`(?m)^ended\s+\d{4}-`, `(?m)^rows\s+3 \(1 distinct domains\)$`,
			`(?m)^done\s+3/3: 2 completed, 0 failed, 1 rejected, 0 cancelled$`,
			`(?m)^answered by\s+override 0, cache 0, model 2$`,
			// test-model has no price: unknown, as the dry run says, not $0.00 (issue 36)
			`(?m)^model cost\s+unknown \(no price for the model\)$`,
			`(?m)^results\s+` + regexp.QuoteMeta(e.api.APIURL()+"/lists/"+id+"/results") + `$`} {
			require.Regexp(t, re, out)
		}
		code, out, errOut = e.cli(context.Background(), "", client, "lists", "status", "--json", id)
		require.Equal(t, 0, code, errOut)
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal([]byte(out), &s))
		require.Equal(t, wire.ListProgress{Done: 3, Total: 3, Completed: 2, Rejected: 1, LLM: 2}, s.Progress)

		code, out, errOut = e.cli(context.Background(), "", client, "lists", "results", id, "--ndjson", "--status", "rejected,FAILED")
		require.Equal(t, 0, code, errOut)
		require.JSONEq(t, `{"row": 3, "input": "10.0.0.1", "status": "REJECTED", "reason": "is an IP address, not a domain",
			"error": "is an IP address, not a domain"}`, out)
		answers := filepath.Join(t.TempDir(), "answers.csv")
		code, out, errOut = e.cli(context.Background(), "", client, "lists", "results", id, "--out", answers, "--after", "1")
		require.Equal(t, 0, code, errOut)
		require.Empty(t, out)
		records := readCSVFile(t, answers)
		require.Len(t, records, 3, "the header and the rows after row 1")
		require.Equal(t, "2", records[1][0])

		code, _, errOut = e.cli(context.Background(), "", client, "lists", "status", uuid.NewString())
		require.Equal(t, 1, code)
		require.Equal(t, "domainclass: 404 Not Found: No list with this id.\n", errOut)
		code, _, errOut = e.cli(context.Background(), "", client, "lists", "status", "nope")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, `domainclass: "nope" is not a list id`)
		code, _, errOut = e.cli(context.Background(), "", client, "lists", "results", id, "--status", "DONE")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, `--status: "DONE" is not one of`)
	})

	t.Run("AListsFailedRowIsFoundRetriedAndWaitedForAgain", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == "flaky.com" && r.Call == 1 {
				return llmtest.Reply{Content: "Sure! It is a great company."} // unreadable: the row FAILS
			}
			return llmtest.Answer(true, 4, "Snacks.")
		}, nil)
		e.start(cli.RoleAll)
		ctx := context.Background()
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		code, out, errOut := e.cli(ctx, "", client, "submit", "--list", "--wait", "--poll", "100ms", "--ndjson", "flaky.com", "steady.com")
		require.Equal(t, 3, code, "the list ended with a row FAILED (issue 36): %s", errOut)
		id := listIDOf(t, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 2, "NDJSON: a row a line")
		var row wire.ListRow
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &row))
		require.Equal(t, classifier.StatusFailed, row.Status)
		require.Contains(t, errOut, `1 rows FAILED (the reason of each is in its error column); queue them again with "domainclass lists retry `+id+`"`)

		code, out, errOut = e.cli(ctx, "", client, "lists", "ls")
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^LIST\s+STATUS\s+CREATED\s+ROWS\s+DONE\s+FAILED\s+TIER$`, out)
		require.Regexp(t, `(?m)^`+id+`\s+COMPLETED\s+\S+\s+2\s+2\s+1\s+standard$`, out)

		code, out, errOut = e.cli(ctx, "", client, "lists", "retry", id)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "list "+id+": 1 rows queued again\n", errOut)
		require.Regexp(t, `(?m)^status\s+RUNNING$`, out)
		answers := filepath.Join(t.TempDir(), "answers.csv")
		code, _, errOut = e.cli(ctx, "", client, "lists", "wait", id, "--poll", "100ms", "--out", answers)
		require.Equal(t, 0, code, errOut)
		records := readCSVFile(t, answers)
		require.Len(t, records, 3)
		for _, r := range records[1:] {
			require.Equal(t, "COMPLETED", r[4], "row %s", r[0])
		}
		require.Equal(t, 2, e.llm.Calls("flaky.com"), "the failed row was asked again, once")
		require.Equal(t, 1, e.llm.Calls("steady.com"))

		code, _, errOut = e.cli(ctx, "", client, "lists", "retry", id)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "list "+id+" has no FAILED row: nothing queued again\n", errOut)

		// --json on a list's results is the deprecated name of --ndjson.
		code, out, errOut = e.cli(ctx, "", client, "submit", "--list", "--wait", "--poll", "100ms", "--json", "steady.com")
		require.Equal(t, 0, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &row))
		require.Contains(t, errOut, "--json on a list is deprecated: it is --ndjson")
	})

	t.Run("CancelStopsAListHeldByTheModel", func(t *testing.T) {
		t.Parallel()
		hold := holdDomain("slow.com")
		e := newE2E(t, hold.reply, nil)
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		code, _, errOut := e.cli(context.Background(), "", client, "submit", "--list", "fast.com", "slow.com")
		require.Equal(t, 0, code, errOut)
		id := listIDOf(t, errOut)
		require.Eventually(t, func() bool {
			return e.listStatus(id).Progress.Completed == 1 && e.llm.Calls("slow.com") == 1
		}, dbtest.Patience(), 20*time.Millisecond)

		code, out, errOut := e.cli(context.Background(), "", client, "lists", "cancel", id)
		require.Equal(t, 0, code, errOut)
		require.Empty(t, errOut)
		require.Regexp(t, `(?m)^status\s+CANCELLED$`, out)
		require.Regexp(t, `(?m)^done\s+2/2: 1 completed, 0 failed, 0 rejected, 1 cancelled$`, out)
		require.Equal(t, "CANCELLED", string(e.listStatus(id).Status))

		code, out, errOut = e.cli(context.Background(), "", client, "lists", "results", id, "--status", "CANCELLED", "--ndjson")
		require.Equal(t, 0, code, errOut)
		require.JSONEq(t, `{"row": 2, "input": "slow.com", "domain": "slow.com", "status": "CANCELLED"}`, out)

		code, out, errOut = e.cli(context.Background(), "", client, "lists", "cancel", "--json", id)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "list "+id+" had already ended (CANCELLED); nothing was cancelled\n", errOut)
		var s wire.ListStatus
		require.NoError(t, json.Unmarshal([]byte(out), &s))
		require.Equal(t, 1, s.Progress.Cancelled)

	})

	t.Run("WaitingOnACancelledListWritesWhatThereIsAndFails", func(t *testing.T) {
		t.Parallel()
		hold := holdDomain("slow.com")
		e := newE2E(t, hold.reply, nil)
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		var stdout, stderr lockedBuffer
		code := make(chan int, 1)
		go func() {
			code <- Run(context.Background(), []string{"submit", "--list", "--wait", "--poll", "100ms", "fast.com", "slow.com"},
				append(e.environ(), client...), strings.NewReader(""), &stdout, &stderr)
		}()
		var id string
		require.Eventually(t, func() bool {
			m := regexp.MustCompile(`(?m)^list (\S+): 2 rows`).FindStringSubmatch(stderr.String())
			if m == nil {
				return false
			}
			id = m[1]
			return e.listStatus(id).Progress.Completed == 1 && e.llm.Calls("slow.com") == 1
		}, dbtest.Patience(), 20*time.Millisecond)
		c, _, cancelErr := e.cli(context.Background(), "", client, "lists", "cancel", id)
		require.Equal(t, 0, c, cancelErr)
		require.Equal(t, 1, <-code, stderr.String())
		errOut := stderr.String()
		require.Contains(t, errOut, "list "+id+" CANCELLED: 2 rows: 1 completed, 0 failed, 0 rejected, 1 cancelled\n")
		require.True(t, strings.HasSuffix(errOut, "domainclass: list "+id+" was cancelled\n"), errOut)
		records, err := csv.NewReader(strings.NewReader(stdout.String())).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 3, "the results are written before the exit code says it failed")
		require.Equal(t, "COMPLETED", records[1][4])
		require.Equal(t, "CANCELLED", records[2][4])
	})

	t.Run("CtrlCStopsWaitingAndLeavesTheListRunning", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		e := newE2E(t, func(llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 4, "x")
			a.Wait = release
			return a
		}, nil)
		e.start(cli.RoleAll)
		ctx, interrupt := context.WithCancel(context.Background())
		var stdout, stderr lockedBuffer
		code := make(chan int, 1)
		go func() {
			code <- Run(ctx, []string{"submit", "--wait", "--poll", "100ms", "--file", "-"},
				append(e.environ(), "DOMAINCLASS_URL="+e.api.APIURL()), strings.NewReader(brands(12)), &stdout, &stderr)
		}()
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "progress: ") && e.llm.Total() > 0 },
			dbtest.Patience(), 20*time.Millisecond, "the list is sent and being answered")
		interrupt() // what Ctrl-C does to the command's context
		require.Equal(t, 1, <-code)
		errOut := stderr.String()
		m := regexp.MustCompile(`stopped waiting; the list goes on: (\S+)\n`).FindStringSubmatch(errOut)
		require.NotNil(t, m, errOut)
		require.Contains(t, errOut, "wait for it again with: domainclass lists wait "+m[1]+"\n")
		require.True(t, strings.HasSuffix(errOut, "domainclass: interrupted; the list was not cancelled\n"), errOut)
		require.Equal(t, "RUNNING", string(e.listStatus(m[1]).Status))
		close(release)
		e.waitList(m[1], "COMPLETED")
	})

	t.Run("WrongKeyIsOneClearLine", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, map[string]string{"AUTH": "on"})
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL(), "DOMAINCLASS_API_KEY=dc_nope"}
		const unauthorized = `domainclass: 401 Unauthorized: The Authorization header is malformed: it must be "Bearer dc_…".` + "\n"
		for _, args := range [][]string{
			{"submit", "--list", "acme.com"},
			{"submit", "--file", "-"},
			{"submit", "--dry-run", "acme.com"},
			{"lists", "status", uuid.NewString()},
			{"lists", "results", uuid.NewString()},
			{"lists", "cancel", uuid.NewString()},
		} {
			code, out, errOut := e.cli(context.Background(), brands(40), client, args...)
			require.Equal(t, 1, code, args)
			require.Empty(t, out, args)
			require.Equal(t, unauthorized, errOut, args)
		}
		require.Zero(t, e.count("list"))
	})

	t.Run("EveryDocumentedProblemTypeIsServed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		e.start(cli.RoleAPI)
		doc := readDoc(t, "docs/api.md")
		slugs := regexp.MustCompile("`/problems/([a-z-]+)`").FindAllStringSubmatch(doc, -1)
		require.NotEmpty(t, slugs)
		for _, m := range slugs {
			resp, err := http.Get(e.api.APIURL() + "/problems/" + m[1])
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "docs/api.md names /problems/%s, which the API does not know", m[1])
		}
	})
}
