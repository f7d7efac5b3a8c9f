package cli

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// run runs a command line with wiring that counts how often the service's
// configuration was read, and fails it.
func run(t *testing.T, args ...string) (code int, stderr string, wired int32) {
	t.Helper()
	var reads atomic.Int32
	wiring := func([]string) (Deployment, error) {
		reads.Add(1)
		return nil, errors.New("no configuration in this test")
	}
	var out, errOut strings.Builder
	code = Run(context.Background(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}, wiring)
	return code, errOut.String(), reads.Load()
}

// TestValidateBeforeRun: every command checks its flags and arguments
// before it reads the configuration, opens a database or calls the API: a
// mistake is one line and exit code 2, and nothing was touched.
func TestValidateBeforeRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "now"}, `domainclass migrate takes no arguments, got "now"`},
		{[]string{"roles", "x"}, `domainclass roles takes no arguments, got "x"`},
		{[]string{"api", "x"}, `domainclass api takes no arguments, got "x"`},
		{[]string{"override", "set", "acme.com", "--note", "why"}, "override set needs --yes or --no (one of them)"},
		{[]string{"override", "set", "acme.com", "--yes", "--note", " \x1b "}, "override set needs --note TEXT"},
		{[]string{"override", "set", "10.0.0.1", "--yes", "--note", "why"}, "10.0.0.1"},
		{[]string{"override", "delete"}, "domainclass override delete takes 1 domain, got 0"},
		{[]string{"override", "export", "--csv=false"}, "override export writes CSV only"},
		{[]string{"override", "export", "--kind", " "}, "--kind must name a kind"},
		{[]string{"override", "list", "--classifier", "nope"}, "nope"},
		{[]string{"override", "import"}, "override import needs exactly one FILE.csv (or - for stdin)"},
		{[]string{"known", "import", "a.csv", "b.csv"}, "known import needs exactly one FILE.csv (or - for stdin)"},
		{[]string{"apikey", "create", "bad name"}, `"bad name" is not a valid key name`},
		{[]string{"apikey", "limits", "team-a", "--rate-per-minute", "-1"}, "limits must not be negative"},
		{[]string{"apikey", "create", "team-a", "--spend-per-day-usd", "-2"}, "a budget must not be negative"},
		{[]string{"apikey", "list", "x"}, `domainclass apikey list takes no arguments, got "x"`},
		{[]string{"jobs", "list", "--state", "nope"}, `unknown state "nope"`},
		{[]string{"jobs", "list", "--limit", "0"}, "--limit must be between 1 and 10000"},
		{[]string{"jobs", "retry"}, "give job ids, or --all-discarded (not both)"},
		{[]string{"eval"}, "eval needs --data FILE.csv"},
		{[]string{"eval", "--data", "x.csv", "--min-accuracy", "2"}, "--min-accuracy must be between 0 and 1"},
		{[]string{"eval", "split"}, "eval split takes --data FILE.csv and no arguments"},
		{[]string{"submit"}, "no domains: give them as arguments or with --file"},
		{[]string{"submit", "--tier", "gold", "a.com"}, `--tier must be standard or economy, not "gold"`},
		{[]string{"submit", "--wait", "--poll", "1ms", "a.com"}, "--poll must be at least 100ms"},
		{[]string{"lists", "status", "nope"}, `"nope" is not a list id`},
		{[]string{"lists", "results", "0190e3c1-0000-7000-8000-000000000000", "--status", "DONE"}, `--status: "DONE" is not one of`},
		{[]string{"lists", "wait", "0190e3c1-0000-7000-8000-000000000000", "--poll", "1ms"}, "--poll must be at least 100ms"},
		{[]string{"lists", "retry", "0190e3c1-0000-7000-8000-000000000000", "--json", "--wait"}, "choose --json (the retry's answer) or --wait"},
		{[]string{"lists", "ls", "--limit", "101"}, "--limit must be from 1 to 100"},
	} {
		code, stderr, wired := run(t, tc.args...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		first, _, _ := strings.Cut(stderr, "\n")
		require.Contains(t, first, tc.want, tc.args)
		require.Equal(t, 2, strings.Count(stderr, "\n"), "%v: one line, and where the usage is: %q", tc.args, stderr)
		require.Zero(t, wired, "%v: the configuration is not read before the command line is valid", tc.args)
	}
}

// TestOnlyTheServiceCommandsReadTheConfiguration: a bad setting fails the
// commands that need it, with its own line and exit code 1.
func TestOnlyTheServiceCommandsReadTheConfiguration(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate"}, {"roles"}, {"worker"}, {"override", "list"}, {"apikey", "list"},
		{"jobs", "list"}, {"override", "delete", "acme.com"}} {
		code, stderr, wired := run(t, args...)
		require.Equal(t, exitFailure, code, args)
		require.Equal(t, "domainclass: no configuration in this test\n", stderr, args)
		require.Equal(t, int32(1), wired, args)
	}
}

// TestNoServiceSaysHowToStartOne (issue 36, a new user): submit against an
// address where nothing listens fails within seconds, saying what is
// missing and how to start it, instead of retrying for minutes.
func TestNoServiceSaysHowToStartOne(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	for _, args := range [][]string{{"submit", "acme.com"}, {"submit", "--list", "--dry-run", "acme.com"},
		{"lists", "status", "0190e3c1-0000-7000-8000-000000000000"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errOut strings.Builder
		start := time.Now()
		code := Run(ctx, args, Streams{Environ: []string{"DOMAINCLASS_URL=" + url}, Stdin: strings.NewReader(""), Stdout: &out,
			Stderr: &errOut}, nil)
		cancel()
		require.Less(t, time.Since(start), 5*time.Second, args)
		require.Equal(t, exitFailure, code, args)
		require.Equal(t, "domainclass: no service at "+url+" (connection refused); start one with `go tool task up` "+
			"(or `domainclass all`), or give its address with --url or DOMAINCLASS_URL\n", errOut.String(), args)
	}
}
