package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// A test binary started with DOMAINCLASS_TEST_RUN set runs the real command
// line instead of the tests: that is how a test gets a worker process it can
// kill -9.
func TestMain(m *testing.M) {
	if args := os.Getenv("DOMAINCLASS_TEST_RUN"); args != "" {
		ctx, stop := signalContext()
		defer stop()
		os.Exit(Run(ctx, strings.Fields(args), os.Environ(), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// e2e is one deployment: a database schema, a fake provider, and the
// processes started on them.
type e2e struct {
	t      *testing.T
	schema string
	llm    *llmtest.Server
	env    map[string]string
	mains  []*Main
	api    *Main
	// traced starts processes instrumented (Main.Traced), for a test that
	// installed its own tracer provider.
	traced bool
	// key is sent by get and wait, for an api with AUTH=on.
	key string
	// tune sets, in the processes start runs, the settings that are
	// reviewed constants and no variable (issue 38): a test that must see
	// a gauge or a fan-out within a second sets them here, not in env.
	tune func(*Config)
}

func newE2E(t *testing.T, handle func(llmtest.Request) llmtest.Reply, env map[string]string) *e2e {
	t.Helper()
	e := &e2e{t: t, schema: dbtest.Schema(t)}
	if handle != nil {
		e.llm = llmtest.New(t, handle)
	} else {
		e.llm = llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "x") })
	}
	e.env = map[string]string{
		"DATABASE_URL":        dbtest.URL(),
		"DATABASE_SCHEMA":     e.schema,
		"HTTP_ADDR":           "127.0.0.1:0",
		"WORKER_ADDR":         "127.0.0.1:0",
		"OPENAI_API_KEY":      "sk-test-secret",
		"OPENAI_BASE_URL":     e.llm.BaseURL(),
		"OPENAI_MODEL":        "test-model",
		"SEARCH_PROVIDER":     "none",
		"AUTH":                "off",
		"LOG_LEVEL":           "warn",
		"LLM_RATE_PER_MINUTE": "60000",
		"SOFT_STOP_TIMEOUT":   "1s",
		"BUSY_SNOOZE":         "1s",
		// A busy machine may take seconds to open a connection: the quick
		// 503 is for production; tests that check it set their own.
		"API_DB_TIMEOUT": dbtest.Patience().String(),
	}
	for k, v := range env {
		e.env[k] = v
	}
	t.Cleanup(func() {
		for _, m := range e.mains {
			ctx, cancel := context.WithTimeout(context.Background(), dbtest.Patience())
			_ = m.Close(ctx)
			cancel()
		}
	})
	return e
}

func (e *e2e) environ() []string {
	var out []string
	for k, v := range e.env {
		out = append(out, k+"="+v)
	}
	return out
}

// start runs a role in this process through the same Main the binary uses.
func (e *e2e) start(role string) *Main {
	e.t.Helper()
	cfg, err := LoadConfig(e.environ())
	require.NoError(e.t, err)
	if e.tune != nil {
		e.tune(&cfg)
	}
	m := NewMain(cfg, role, slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	m.TestOnly, m.Traced = true, e.traced
	require.NoError(e.t, m.Run(context.Background()))
	e.mains = append(e.mains, m)
	if m.runsAPI() && e.api == nil {
		e.api = m
	}
	return m
}

// stop closes an in-process Main the way SIGTERM does.
func (e *e2e) stop(m *Main) {
	ctx, cancel := context.WithTimeout(context.Background(), dbtest.Patience())
	defer cancel()
	require.NoError(e.t, m.Close(ctx))
	for i, x := range e.mains {
		if x == m {
			e.mains = append(e.mains[:i], e.mains[i+1:]...)
		}
	}
}

// process is a `domainclass <role>` child process.
type process struct {
	*exec.Cmd
	// URL is where it serves (its API, or a worker's health and metrics).
	URL string
}

// startProcess runs `domainclass <role>` as a child process and returns once
// it serves (so its signal handlers are in place).
func (e *e2e) startProcess(role string) *process {
	e.t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), e.environ()...)
	cmd.Env = append(cmd.Env, "DOMAINCLASS_TEST_RUN="+role)
	stdout, err := cmd.StdoutPipe()
	require.NoError(e.t, err)
	cmd.Stderr = e.t.Output()
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	serving := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			if i := strings.Index(line, " on http://"); i >= 0 {
				select {
				case serving <- line[i+len(" on "):]:
				default:
				}
			}
		}
	}()
	select {
	case url := <-serving:
		return &process{Cmd: cmd, URL: url}
	case <-time.After(dbtest.Patience()):
		e.t.Fatalf("domainclass %s did not start serving", role)
		return nil
	}
}

type jobView struct {
	JobID       string     `json:"job_id"`
	Status      string     `json:"status"`
	Error       string     `json:"error"`
	CompletedAt *time.Time `json:"completed_at"`
	Progress    struct {
		Total int `json:"total"`
		Done  int `json:"done"`
	} `json:"progress"`
	Results []struct {
		Domain       string    `json:"domain"`
		Status       string    `json:"status"`
		IsCPG        *bool     `json:"is_cpg"`
		Confidence   *int      `json:"confidence"`
		Reasoning    string    `json:"reasoning"`
		Source       string    `json:"source"`
		Error        string    `json:"error"`
		ClassifiedAt time.Time `json:"classified_at"`
		wire.Provenance
	} `json:"results"`
}

func (j jobView) result(domain string) (status, source string) {
	for _, r := range j.Results {
		if r.Domain == domain {
			return r.Status, r.Source
		}
	}
	return "", ""
}

func (e *e2e) submit(domains ...string) string {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"domains": domains})
	resp, err := http.Post(e.api.APIURL()+"/domains/classify", "application/json", strings.NewReader(string(body)))
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(e.t, http.StatusAccepted, resp.StatusCode, "body: %s", b)
	var v jobView
	require.NoError(e.t, json.Unmarshal(b, &v))
	return v.JobID
}

func (e *e2e) get(id string) jobView {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.api.APIURL()+"/domains/classify/"+id, nil)
	require.NoError(e.t, err)
	if e.key != "" {
		req.Header.Set("Authorization", "Bearer "+e.key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var v jobView
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}

// wait polls the status URL until the job has the given status.
func (e *e2e) wait(id, status string, within time.Duration) jobView {
	e.t.Helper()
	var v jobView
	require.Eventually(e.t, func() bool {
		v = e.get(id)
		return v.Status == status
	}, within, 25*time.Millisecond, "job %s: want %s, last seen %+v", id, status, v)
	return v
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()

	t.Run("SubmitPollReadThenCache", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			switch r.Domain {
			case "crm.io":
				return llmtest.Answer(false, 5, "Sells CRM software.")
			case "unsure.com":
				return llmtest.Answer(true, 1, "No real basis.")
			case "garbled.com":
				if r.Call == 1 {
					return llmtest.Reply{Content: "Sure! It is."}
				}
			}
			return llmtest.Answer(true, 4, "Makes packaged snacks.")
		}, nil)
		e.start(cli.RoleAPI)
		e.start(cli.RoleWorker)

		id := e.submit("https://www.Acme-Snacks.com/about", "crm.io", "unsure.com", "garbled.com")
		v := e.wait(id, "COMPLETED", dbtest.Patience())
		require.Equal(t, 4, v.Progress.Total)
		require.Equal(t, 4, v.Progress.Done)
		require.NotNil(t, v.CompletedAt)
		acme := v.Results[0]
		require.Equal(t, "acme-snacks.com", acme.Domain)
		require.Equal(t, "COMPLETED", acme.Status)
		require.True(t, *acme.IsCPG)
		require.Equal(t, 4, *acme.Confidence)
		require.Equal(t, "Makes packaged snacks.", acme.Reasoning)
		require.Equal(t, "llm", acme.Source)
		require.Equal(t, []string{"test-model", "none"}, []string{acme.Model, acme.Search})
		require.NotEmpty(t, acme.PromptVersion)
		require.NotNil(t, acme.Evidence, "an answer a model made has its evidence, here none")
		require.False(t, *v.Results[1].IsCPG)
		status, _ := v.result("garbled.com")
		require.Equal(t, "FAILED", status)
		require.Contains(t, v.Results[3].Error, "unreadable model output")

		// Again: the confident answers come from the cache; confidence 1 and
		// FAILED are asked again.
		again := e.wait(e.submit("acme-snacks.com", "crm.io", "unsure.com", "garbled.com"), "COMPLETED", dbtest.Patience())
		for domain, want := range map[string]string{"acme-snacks.com": "cache", "crm.io": "cache", "unsure.com": "llm", "garbled.com": "llm"} {
			_, source := again.result(domain)
			require.Equal(t, want, source, domain)
		}
		require.Equal(t, acme.Provenance, again.Results[0].Provenance, "a cached answer has the provenance of the call that made it")
		require.Equal(t, map[string]int{"acme-snacks.com": 1, "crm.io": 1, "unsure.com": 2, "garbled.com": 2}, e.llm.Domains())
	})

	t.Run("TwoWorkersSharingADomainPayOnce", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		var once sync.Once
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 5, "Beverages.")
			if r.Domain == "shared.com" {
				a.Wait = release
			}
			return a
		}, map[string]string{"CLASSIFY_WORKERS": "1"})
		e.start(cli.RoleAPI)
		e.start(cli.RoleWorker)
		e.start(cli.RoleWorker) // a second worker process on the same database
		first := e.submit("shared.com", "one.com")
		second := e.submit("shared.com", "two.com")
		require.Eventually(t, func() bool {
			return e.get(first).Status == "RUNNING" && e.get(second).Status == "RUNNING"
		}, dbtest.Patience(), 20*time.Millisecond)
		once.Do(func() { close(release) })
		e.wait(first, "COMPLETED", dbtest.Patience())
		e.wait(second, "COMPLETED", dbtest.Patience())
		require.Equal(t, 1, e.llm.Calls("shared.com"))
	})

	t.Run("ThrottledThenAnswered", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			if r.Call == 1 {
				return llmtest.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"})
			}
			return llmtest.Answer(true, 5, "Snacks.")
		}, nil)
		e.start(cli.RoleAll)
		v := e.wait(e.submit("acme.com"), "COMPLETED", dbtest.Patience())
		status, _ := v.result("acme.com")
		require.Equal(t, "COMPLETED", status)
		require.Equal(t, 2, e.llm.Calls("acme.com"))
	})

	t.Run("EveryAttemptFailsEndsFailed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusInternalServerError, nil) },
			map[string]string{"JOB_MAX_ATTEMPTS": "2"})
		e.start(cli.RoleAll)
		v := e.wait(e.submit("acme.com"), "FAILED", dbtest.Patience())
		require.Contains(t, v.Error, "gave up after 2 attempts")
		require.NotNil(t, v.CompletedAt)
		var state string
		require.Eventually(t, func() bool {
			require.NoError(t, e.api.DB.Pool.QueryRow(context.Background(),
				"SELECT state FROM river_job WHERE kind = 'classify'").Scan(&state))
			return state == "discarded"
		}, dbtest.Patience(), 20*time.Millisecond)
		tries := jobs.DefaultSettings().DomainAttempts
		require.Equal(t, 2*tries, e.llm.Calls("acme.com"), "each attempt tries the domain DOMAIN_ATTEMPTS times")
	})

	t.Run("SoftStopMidJobThenRestartPaysOnlyForUnfinished", func(t *testing.T) {
		t.Parallel()
		hold := holdDomain("slow.com")
		e := newE2E(t, hold.reply, nil)
		e.start(cli.RoleAPI)
		w := e.start(cli.RoleWorker)
		id := e.submit("fast.com", "slow.com")
		require.Eventually(t, func() bool {
			status, _ := e.get(id).result("fast.com")
			return status == "COMPLETED" && e.llm.Calls("slow.com") == 1
		}, dbtest.Patience(), 20*time.Millisecond)

		e.stop(w) // SIGTERM: the running job gets SOFT_STOP_TIMEOUT, then is cancelled
		require.Equal(t, "RUNNING", e.get(id).Status)
		hold.letGo()

		e.start(cli.RoleWorker)
		v := e.wait(id, "COMPLETED", dbtest.Patience())
		require.Equal(t, 2, v.Progress.Done)
		require.Equal(t, 1, e.llm.Calls("fast.com"), "a finished domain is never paid for again")
		require.Equal(t, 2, e.llm.Calls("slow.com"))
	})

	t.Run("KilledWorkerIsRescuedAndPaysOnlyForUnfinished", func(t *testing.T) {
		t.Parallel()
		hold := holdDomain("slow.com")
		e := newE2E(t, hold.reply, map[string]string{"JOB_TIMEOUT": "2s", "RESCUE_STUCK_AFTER": "2s"})
		e.start(cli.RoleAPI)
		child := e.startProcess(cli.RoleWorker)
		id := e.submit("fast.com", "slow.com")
		require.Eventually(t, func() bool {
			status, _ := e.get(id).result("fast.com")
			return status == "COMPLETED" && e.llm.Calls("slow.com") == 1
		}, dbtest.Patience(), 20*time.Millisecond)

		require.NoError(t, child.Process.Signal(syscall.SIGKILL))
		_ = child.Wait()
		hold.letGo()

		// A new worker becomes leader once the dead one's lease runs out, and
		// River's rescuer puts the stuck job back.
		e.start(cli.RoleWorker)
		v := e.wait(id, "COMPLETED", dbtest.Patience())
		require.Equal(t, 2, v.Progress.Done)
		require.Equal(t, 1, e.llm.Calls("fast.com"), "a finished domain is never paid for again")
		require.Equal(t, 2, e.llm.Calls("slow.com"))
	})
}

// TestWorkerKilled_ItsWorkMovesInSeconds: issue 36 saw a list make no
// progress for 608 s after its worker was killed with SIGKILL (its chunks
// stayed running in River until RESCUE_STUCK_AFTER), and an interactive job
// end after 1,006 s. With River's own rescue at its 10-minute default, the
// dead process's lease running out hands its work back.
func TestWorkerKilled_ItsWorkMovesInSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// slow.com's calls hang: those of the process that is killed forever,
	// those after the kill until gate closes.
	var (
		killed atomic.Bool
		never  = make(chan struct{})
		gate   = make(chan struct{})
	)
	e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
		a := llmtest.Answer(true, 4, "Soap.")
		if r.Domain == "slow.com" {
			a.Wait = never
			if killed.Load() {
				a.Wait = gate
			}
		}
		return a
	}, map[string]string{"PROCESS_LEASE_TTL": "1s"})
	e.start(cli.RoleAPI)
	child := e.startProcess(cli.RoleWorker)
	domains := []string{"slow.com"}
	for i := range 11 {
		domains = append(domains, fmt.Sprintf("list-%d.com", i))
	}
	c := client.New(e.api.APIURL(), "")
	acc, err := c.UploadList(ctx, func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("domain\n" + strings.Join(domains, "\n") + "\n")), nil
	}, client.ListOptions{ContentType: client.ListCSV})
	require.NoError(t, err)
	job := e.submit("fast.com", "slow.com")
	require.Eventually(t, func() bool {
		status, _ := e.get(job).result("fast.com")
		return status == "COMPLETED" && e.llm.Calls("slow.com") == 1 && e.listStatus(acc.ListID).Progress.Done == len(domains)-1
	}, dbtest.Patience(), 20*time.Millisecond)

	killed.Store(true)
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	var s wire.ListStatus
	require.Eventually(t, func() bool {
		s = e.listStatus(acc.ListID)
		return s.Waiting == db.NoWorkerWaiting
	}, dbtest.Patience(), 20*time.Millisecond, "with no worker alive, the list says so: %+v", s)

	e.start(cli.RoleWorker) // River's own rescue would wait RESCUE_STUCK_AFTER, 10 minutes
	require.Eventually(t, func() bool {
		s = e.listStatus(acc.ListID)
		return strings.Contains(s.Waiting, "a worker process stopped at") && e.llm.Calls("slow.com") == 2
	}, dbtest.Patience(), 20*time.Millisecond, "the list says its work was handed back, and asks again: %+v", s)
	close(gate)
	v := e.wait(job, "COMPLETED", dbtest.Patience())
	require.Equal(t, 2, v.Progress.Done)
	s = e.waitList(acc.ListID, "COMPLETED")
	require.Equal(t, len(domains), s.Progress.Completed)
	require.Empty(t, s.Waiting, "an ended list waits for nothing")
	require.Equal(t, 2, e.llm.Calls("slow.com"), "the call that died with the process, and one more for the job and the list")
	require.Equal(t, 1, e.llm.Calls("fast.com"))

	var handedBack int
	require.NoError(t, e.api.DB.Pool.QueryRow(ctx, `
		SELECT count(*) FROM river_job, unnest(errors) e
		WHERE kind IN ('classify', 'classify_list') -- a periodic job running at the kill is handed back too
		  AND e->>'error' LIKE 'worker process % stopped renewing its lease%'`).Scan(&handedBack))
	require.Equal(t, 2, handedBack, "River UI says why the job and the chunk ran again")
}

func TestRun_CommandLine(t *testing.T) {
	t.Parallel()
	run := func(args []string, env ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := Run(context.Background(), args, env, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, _ := run([]string{"--help"})
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage:")

	for _, cmd := range [][]string{{"migrate"}, {"api"}, {"known", "import"}, {"override", "import"}, {"override", "set"}, {"override", "list"},
		{"override", "delete"}, {"override", "export"}, {"jobs", "list"}, {"jobs", "retry"},
		{"apikey", "create"}, {"apikey", "limits"}, {"submit"}, {"lists", "status"}, {"lists", "results"}, {"lists", "cancel"},
		{"eval"}, {"completion", "bash"}} {
		code, out, _ := run(append(cmd, "--help"))
		require.Equal(t, 0, code, cmd)
		require.Contains(t, out, "Usage:\n  domainclass "+strings.Join(cmd, " "), cmd)
		require.Contains(t, out, "\n  -h, --help", "%v --help lists its flags", cmd)
	}
	code, out, _ = run([]string{"completion", "bash"})
	require.Equal(t, 0, code)
	require.Contains(t, out, "bash completion", "shell completion comes with the CLI library")

	// Flags go where people put them: after the name too.
	code, _, errOut := run([]string{"apikey", "limits", "team-a", "--rate-per-minute", "600"}, "DATABASE_URL=postgres://u@127.0.0.1:1/x?connect_timeout=1")
	require.Equal(t, 1, code, "the flags parse; only the database is missing: %s", errOut)
	require.Contains(t, errOut, "the database is unavailable")

	code, _, errOut = run(nil)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no command given")

	code, _, errOut = run([]string{"frobnicate"})
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `domainclass: unknown command "frobnicate"`)

	code, _, errOut = run([]string{"migrate", "--bogus"})
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "unknown flag: --bogus")

	code, _, errOut = run([]string{"apikey", "create"})
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "domainclass apikey create takes 1 name, got 0")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--out", "a.csv", "a.com"}, "--out writes the results, so it needs --wait"},
		{[]string{"submit", "--dry-run", "--csv", "a.com"}, "--csv prints results, and a dry run has none"},
		{[]string{"lists"}, `"lists" needs a subcommand: cancel, ls, results, retry, status, wait`},
		{[]string{"lists", "status"}, "domainclass lists status takes 1 list id, got 0"},
		{[]string{"lists", "cancel", "a", "b"}, "domainclass lists cancel takes 1 list id, got 2"},
		{[]string{"lists", "results", "--after", "-1", "0190e3c1-0000-7000-8000-000000000000"}, "--after must be a row number, 0 or more"},
	} {
		code, _, errOut := run(tc.args)
		require.Equal(t, 2, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
	}

	code, _, errOut = run([]string{"migrate"}, "JOB_TIMEOUT=soon")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one clear line: %q", errOut)
	require.Contains(t, errOut, "JOB_TIMEOUT")

	code, _, errOut = run([]string{"migrate"}, "DATABASE_URL=postgres://u:hunter2@127.0.0.1:1/x?connect_timeout=1")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one clear line: %q", errOut)
	require.NotContains(t, errOut, "hunter2")
}

// TestRun_SpoolDirIsCheckedWhereUploadsAre: the processes that read list
// uploads (api, all) check their spool directory as they start, and say
// what to set; migrate and a worker spool nothing and start without one
// (issue 36: the image had no /tmp, and every command exited 1).
func TestRun_SpoolDirIsCheckedWhereUploadsAre(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "gone")
	e := newE2E(t, nil, map[string]string{"LIST_SPOOL_DIR": missing})
	run := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		code := Run(context.Background(), args, e.environ(), strings.NewReader(""), &out, &errOut)
		return code, errOut.String()
	}
	code, errOut := run("migrate")
	require.Equal(t, 0, code, "migrate spools nothing: %s", errOut)
	e.start(cli.RoleWorker) // a worker neither

	for _, role := range []string{cli.RoleAPI, cli.RoleAll} {
		code, errOut = run(role)
		require.Equal(t, 1, code, role)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one clear line: %q", errOut)
		require.Contains(t, errOut, "LIST_SPOOL_DIR "+missing+": no such file or directory; set LIST_SPOOL_DIR")
	}
}

func TestKnownImport(t *testing.T) {
	t.Parallel()
	schema := dbtest.Schema(t)
	env := []string{"DATABASE_URL=" + dbtest.URL(), "DATABASE_SCHEMA=" + schema}
	importCSV := func(csv string) (int, string, string) {
		path := t.TempDir() + "/known.csv"
		require.NoError(t, os.WriteFile(path, []byte(csv), 0o600))
		var out, errOut strings.Builder
		code := Run(context.Background(), []string{"known", "import", path}, env, nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	overrides := func() []classifier.Override {
		d, err := db.Open(context.Background(), db.Config{URL: dbtest.URL(), Schema: schema})
		require.NoError(t, err)
		defer d.Close()
		list, err := db.OverrideList(context.Background(), d.Pool, "")
		require.NoError(t, err)
		return list
	}
	count := func() int { return len(overrides()) }

	code, out, errOut := importCSV("name,domain\nUnilever,https://www.unilever.com/\nP&G,pg.com\nP&G again,www.pg.com\n")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "known import: 2 companies for cpg (2 new, 0 updated, 1 duplicate rows skipped)\n", out)
	got := overrides()
	require.Len(t, got, 2)
	for i, name := range []string{"P&G", "Unilever"} { // by domain: pg.com, unilever.com
		o := got[i]
		require.Equal(t, []any{"cpg", true, 5, "known import", "Listed as a known CPG company (" + name + ")."},
			[]any{o.Classifier, o.Answer, o.Confidence, o.SetBy, o.Note}, "a known company is a yes override")
	}

	code, out, errOut = importCSV("domain,name\nunilever.com,Unilever PLC\n")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "known import: 1 company for cpg (0 new, 1 updated)\n", out)
	require.Equal(t, 2, count())

	code, _, errOut = importCSV("domain,name\nnestle.com,Nestlé\n10.0.0.1,Router\n")
	require.Equal(t, 1, code)
	require.Equal(t, "domainclass: line 3: 10.0.0.1: is an IP address, not a domain\n", errOut)
	require.Equal(t, 2, count(), "a bad row writes nothing")

	code, _, errOut = importCSV("domain,company\nx.com,X\n")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "the CSV header must name the columns domain and name")

	var out2, errOut2 strings.Builder
	require.Equal(t, 2, Run(context.Background(), []string{"known", "import"}, env, nil, &out2, &errOut2))
	require.Contains(t, errOut2.String(), "exactly one FILE.csv")

	// Its name among the override commands; "known import" stays an alias.
	path := t.TempDir() + "/companies.csv"
	require.NoError(t, os.WriteFile(path, []byte("domain,name\nnestle.com,Nestlé\n"), 0o600))
	var out3, errOut3 strings.Builder
	require.Equal(t, 0, Run(context.Background(), []string{"override", "import", path}, env, nil, &out3, &errOut3), errOut3.String())
	require.Equal(t, "override import: 1 company for cpg (1 new, 0 updated)\n", out3.String())
	require.Equal(t, 3, count())
}

// holder answers every model request at once, except those about one
// domain: while holding, it keeps them waiting until their request is
// cancelled (the worker stops or dies).
type holder struct {
	domain  string
	holding atomic.Bool
	never   chan struct{}
}

func holdDomain(domain string) *holder {
	h := &holder{domain: domain, never: make(chan struct{})}
	h.holding.Store(true)
	return h
}

func (h *holder) reply(r llmtest.Request) llmtest.Reply {
	a := llmtest.Answer(true, 4, "Soap.")
	if r.Domain == h.domain && h.holding.Load() {
		a.Wait = h.never
	}
	return a
}

// letGo answers later requests about the domain at once.
func (h *holder) letGo() { h.holding.Store(false) }
