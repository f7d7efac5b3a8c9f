package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersion (issue 36, a new user): `domainclass version` and
// `--version` say which build this is.
func TestVersion(t *testing.T) {
	t.Parallel()
	goVersion := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut strings.Builder
		code := Run(t.Context(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Version: "1.4.0"}, nil)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut.String())
		require.Equal(t, "domainclass 1.4.0 ("+goVersion+")\n", out.String(), args)
	}
	code, stderr, _ := run(t, "version", "now")
	require.Equal(t, exitUsage, code, stderr)

	built := &debug.BuildInfo{Main: debug.Module{Version: "v1.5.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "010fa18c4e5f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"}, {Key: "vcs.time", Value: "2026-04-01T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, "domainclass 1.4.0 (revision 010fa18c4e5f, 2026-04-01T12:00:00Z, modified; "+goVersion+")",
		versionOf("1.4.0", built), "the version set at build time, and the revision")
	require.Equal(t, "domainclass v1.5.0 (revision 010fa18c4e5f, 2026-04-01T12:00:00Z, modified; "+goVersion+")",
		versionOf("dev", built), "unset: the module's version from the build")
	require.Equal(t, "domainclass dev ("+goVersion+")", versionOf("dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}))
	require.Equal(t, "domainclass dev ("+goVersion+")", versionOf("", nil))
}
