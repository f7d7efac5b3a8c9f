package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/wire"
)

// cli runs the binary's command line with e's environment plus extra.
func (e *e2e) cli(ctx context.Context, stdin string, extra []string, args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := Run(ctx, args, append(e.environ(), extra...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// apiKey creates a key through the CLI, as an operator would.
func (e *e2e) apiKey(name string) string {
	e.t.Helper()
	code, out, errOut := e.cli(context.Background(), "", nil, "apikey", "create", name)
	require.Equal(e.t, 0, code, errOut)
	return strings.TrimSpace(out)
}

func brands(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "brand%02d.com\n", i)
	}
	return b.String()
}

func TestSubmit(t *testing.T) {
	t.Parallel()

	t.Run("Waits25DomainsAsOneListAndWritesItsCSV", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			return llmtest.Answer(r.Domain != "brand07.com", 4, "Sells "+r.Domain+" snacks.")
		}, map[string]string{"AUTH": "on"})
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL(), "DOMAINCLASS_API_KEY=" + e.apiKey("team-a")}

		answers := filepath.Join(t.TempDir(), "answers.csv")
		code, out, errOut := e.cli(context.Background(), brands(25), client,
			"submit", "--wait", "--poll", "100ms", "--file", "-", "--out", answers)
		require.Equal(t, 0, code, errOut)
		require.Empty(t, out, "the results went to --out")
		m := regexp.MustCompile(`(?m)^list (\S+): 25 rows, 25 domains, 0 duplicates, 0 rejected$`).FindStringSubmatch(errOut)
		require.NotNil(t, m, "more than 10 domains are one list:\n%s", errOut)
		id := m[1]
		requireProgressLines(t, errOut, 25)
		require.Contains(t, errOut, "list "+id+" COMPLETED: 25 rows: 25 completed, 0 failed, 0 rejected, 0 cancelled\n")
		require.Contains(t, errOut, "results of list "+id+" written to "+answers+"\n")
		records := readCSVFile(t, answers)
		require.Len(t, records, 26, "a header and 25 rows")
		require.Equal(t, wire.ListRowColumns("is_cpg"), records[0])
		require.Equal(t, []string{"1", "brand00.com", "", "brand00.com", "COMPLETED", "true", "4", "Sells brand00.com snacks.", "llm"}, records[1][:9])
		require.Equal(t, []string{"8", "brand07.com", "", "brand07.com", "COMPLETED", "false"}, records[8][:6])
		require.Equal(t, "25", records[25][0])
		var jobs int
		require.NoError(t, e.api.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM classify_job").Scan(&jobs))
		require.Zero(t, jobs, "no job was made")
		require.Equal(t, 25, e.llm.Total(), "one model call per domain")

		// Again, as JSON and CSV: now from the cache.
		code, out, errOut = e.cli(context.Background(), "", client, append([]string{"submit", "--wait", "--json", "--poll", "100ms"}, strings.Fields(brands(10))...)...)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `(?m)^job \S+: 10 domains$`, errOut, "10 domains are a job")
		require.Contains(t, errOut, "progress: 10/10 domains done, 1/1 jobs finished")
		var rows []map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &rows))
		require.Len(t, rows, 10)
		require.Equal(t, "cache", rows[0]["source"])
		require.NotEmpty(t, rows[0]["job_id"])

		code, out, errOut = e.cli(context.Background(), "name,domain\nA,brand01.com\nB,https://www.brand02.com/\n", client,
			"submit", "--wait", "--csv", "--poll", "100ms", "--file", "-")
		require.Equal(t, 0, code, errOut)
		records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, []string{"domain", "status", "is_cpg", "confidence", "source", "reasoning", "error", "job_id"}, records[0])
		require.Equal(t, []string{"brand01.com", "COMPLETED", "true", "4", "cache", "Sells brand01.com snacks."}, records[1][:6])
		require.Equal(t, "brand02.com", records[2][0])
	})

	t.Run("RefusesBadInputBeforeSubmittingAnything", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "x") }, nil)
		e.start(cli.RoleAll)
		code, _, errOut := e.cli(context.Background(), "", []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
			"submit", "ok.com", "10.0.0.1", "localhost")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `"10.0.0.1": is an IP address, not a domain`)
		require.Contains(t, errOut, "domainclass: 2 of 3 domains cannot be classified (listed above); nothing was submitted")
		var n int
		require.NoError(t, e.api.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM classify_job").Scan(&n))
		require.Zero(t, n)

		code, _, errOut = e.cli(context.Background(), "", nil, "submit", "--json", "a.com")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "--json, --ndjson and --csv print results, so they need --wait")
	})

	// Issue 36 (a new user): a script tells "every row answered" (0) from
	// "the work ended, some rows FAILED" (3) and from an error (1).
	t.Run("ExitsThreeWhenAJobFailed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Status(http.StatusInternalServerError, nil) },
			map[string]string{"JOB_MAX_ATTEMPTS": "1"})
		e.start(cli.RoleAll)
		code, out, errOut := e.cli(context.Background(), "", []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
			"submit", "--wait", "--poll", "100ms", "acme.com")
		require.Equal(t, 3, code, errOut)
		require.Regexp(t, `domainclass: job \S+ failed: gave up after 1 attempts`, errOut)
		require.Contains(t, out, "acme.com", "the results are still printed")
	})

	t.Run("ExitsThreeWhenRowsFailed", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
			if r.Domain == "garbled.com" {
				return llmtest.Reply{Content: "Sure! It is a great company."} // unreadable: the domain FAILS
			}
			return llmtest.Answer(true, 4, "Snacks.")
		}, nil)
		e.start(cli.RoleAll)
		client := []string{"DOMAINCLASS_URL=" + e.api.APIURL()}
		code, out, errOut := e.cli(context.Background(), "", client, "submit", "--wait", "--csv", "--poll", "100ms", "acme.com", "garbled.com")
		require.Equal(t, 3, code, errOut)
		require.Contains(t, errOut, "domainclass: 1 of 2 domains FAILED (the reason of each is in its error column)")
		records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 3, "the results are still printed")

		code, _, errOut = e.cli(context.Background(), "", client, "submit", "--wait", "--poll", "100ms", "acme.com")
		require.Equal(t, 0, code, "every row answered: %s", errOut)
	})

	t.Run("WrongKeyIsOneClearLine", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "x") }, map[string]string{"AUTH": "on"})
		e.start(cli.RoleAll)
		code, _, errOut := e.cli(context.Background(), "", []string{"DOMAINCLASS_URL=" + e.api.APIURL(), "DOMAINCLASS_API_KEY=dc_nope"},
			"submit", "acme.com")
		require.Equal(t, 1, code)
		require.Equal(t, `domainclass: 401 Unauthorized: The Authorization header is malformed: it must be "Bearer dc_…".`+"\n", errOut)
	})

	t.Run("CtrlCStopsWaitingAndLeavesTheJobRunning", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		e := newE2E(t, func(llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 4, "x")
			a.Wait = release
			return a
		}, nil)
		e.start(cli.RoleAll)
		ctx, interrupt := context.WithCancel(context.Background())
		var (
			wg     sync.WaitGroup
			code   int
			errOut string
		)
		wg.Go(func() {
			code, _, errOut = e.cli(ctx, brands(10), []string{"DOMAINCLASS_URL=" + e.api.APIURL()},
				"submit", "--wait", "--poll", "100ms", "--file", "-")
		})
		require.Eventually(t, func() bool { return e.llm.Total() > 0 }, dbtest.Patience(), 20*time.Millisecond)
		interrupt() // what Ctrl-C does to the command's context
		wg.Wait()
		require.Equal(t, 1, code)
		m := regexp.MustCompile(`stopped waiting; the jobs go on: (\S+)\n`).FindStringSubmatch(errOut)
		require.NotNil(t, m, errOut)
		require.Contains(t, errOut, "domainclass: interrupted; the jobs were not cancelled")
		close(release)
		e.wait(m[1], "COMPLETED", dbtest.Patience())
	})
}

// TestSecretsNeverLeak runs a full job, and the usual mistakes, with every
// secret set, and looks for each secret in every log line and response.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"OPENAI_API_KEY":   "sk-proj-SECRETopenai0123456789",
		"RIVERUI_PASSWORD": "riverui-SECRET-pass",
		"BRAVE_API_KEY":    "brave-SECRET-key",
		"db password":      "pg-SECRET-pass",
		"WEBHOOK_SECRET":   "whsec_" + base64Std("webhook-SECRET-0123456789abcdef"),
	}
	var hooks atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hooks.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError) // one failed delivery, logged
		}
	}))
	t.Cleanup(receiver.Close)
	var calls atomic.Int64
	srv := llmtest.New(t, func(r llmtest.Request) llmtest.Reply {
		switch calls.Add(1) {
		case 1:
			return llmtest.Status(http.StatusUnauthorized, nil) // a provider refusing the key
		case 2:
			return llmtest.Status(http.StatusInternalServerError, nil)
		}
		return llmtest.Answer(true, 4, "Snacks.")
	})
	dbURL := strings.Replace(dbtest.URL(), "postgres@", "postgres:"+secrets["db password"]+"@", 1)
	e := newE2E(t, nil, map[string]string{
		"AUTH": "on", "OPENAI_API_KEY": secrets["OPENAI_API_KEY"], "OPENAI_BASE_URL": srv.BaseURL(),
		"RIVERUI_USER": "ops", "RIVERUI_PASSWORD": secrets["RIVERUI_PASSWORD"], "BRAVE_API_KEY": secrets["BRAVE_API_KEY"],
		"DATABASE_URL": dbURL, "LOG_LEVEL": "debug", "LOG_FORMAT": "json",
		"WEBHOOK_SECRET": secrets["WEBHOOK_SECRET"], "CALLBACK_ALLOW_PRIVATE": "true",
		"WEBHOOK_RETRY_SCHEDULE": "10ms,10ms",
	})

	var logs lockedBuffer
	cfg, err := LoadConfig(e.environ())
	require.NoError(t, err)
	m := NewMain(cfg, cli.RoleAll, cfg.NewLogger(&logs))
	m.TestOnly = true
	require.NoError(t, m.Run(context.Background()))
	e.mains, e.api = append(e.mains, m), m
	key := e.apiKey("team-a")
	secrets["API key"] = key

	var responses bytes.Buffer
	do := func(method, path, body string, header ...string) int {
		req, _ := http.NewRequest(method, m.APIURL()+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&responses, "%d %v %s\n", resp.StatusCode, resp.Header, b)
		return resp.StatusCode
	}
	bearer := "Bearer " + key
	require.Equal(t, 202, do("POST", "/domains/classify", `{"domains":["acme.com","beta.com","gamma.com"]}`,
		"Authorization", bearer, "X-Callback-URL", receiver.URL+"/hook?token=receiver-SECRET"))
	do("POST", "/domains/classify", `{"domains":["acme.com"]}`, "Authorization", "Bearer "+key[:len(key)-1]+"x")
	do("POST", "/domains/classify", `{"domains":["acme.com"]}`, "Authorization", key)
	do("POST", "/domains/classify", `{"domains":`, "Authorization", bearer)
	do("GET", "/riverui/", "", "Authorization", "Basic "+basic("ops", secrets["RIVERUI_PASSWORD"]+"x"))
	require.Equal(t, 200, do("GET", "/riverui/api/jobs?state=completed", "", "Authorization", "Basic "+basic("ops", secrets["RIVERUI_PASSWORD"])))
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, m.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM classify_job WHERE status = 'COMPLETED'").Scan(&n))
		return n == 1 && hooks.Load() == 2
	}, dbtest.Patience(), 20*time.Millisecond, "the job completed and its webhook was delivered on the second try")
	do("GET", "/metrics", "")
	_, cliOut, cliErr := e.cli(context.Background(), "", nil, "apikey", "list")
	_, _, badURLErr := e.cli(context.Background(), "", []string{"DATABASE_URL=postgres://u:" + secrets["db password"] + "@127.0.0.1:1/x?connect_timeout=1"}, "migrate")

	require.NoError(t, m.Close(context.Background()))
	e.mains = nil
	all := logs.String() + responses.String() + cliOut + cliErr + badURLErr
	require.Contains(t, logs.String(), `"msg":"classify job completed"`, "the job ran, with its log lines captured")
	require.Contains(t, logs.String(), "401", "the provider's refusal was logged")
	secrets["the end of the API key"] = key[len(key)-20:]
	secrets["the webhook secret's key"] = strings.TrimPrefix(secrets["WEBHOOK_SECRET"], "whsec_")
	secrets["the callback URL's query"] = "receiver-SECRET"
	for name, secret := range secrets {
		if i := strings.Index(all, secret); i >= 0 {
			t.Errorf("%s leaked: …%s…", name, all[max(0, i-200):i])
		}
	}
}

func basic(user, pass string) string {
	return base64Std(user + ":" + pass)
}

// lockedBuffer is a buffer several goroutines log into.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
