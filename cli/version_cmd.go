package cli

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what `domainclass version` and `--version` print: the
// binary's version (set at build time, -X main.Version=...; else the
// module's, from the build information), the revision it was built from
// when the build recorded one, and the Go version and platform:
//
//	domainclass 1.4.0 (revision 010fa18c4e5f, 2026-04-01T12:00:00Z; go1.26.0 linux/amd64)
func versionText(version string) string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(version, info)
}

// versionOf is versionText of a build described by info (nil: none).
func versionOf(version string, info *debug.BuildInfo) string {
	var vcs []string
	ok := info != nil
	if version == "" || version == "dev" {
		version = "dev"
		if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
	}
	if ok {
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			vcs = append(vcs, "revision "+rev[:min(len(rev), 12)])
		}
		if at := settings["vcs.time"]; at != "" {
			vcs = append(vcs, at)
		}
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
	}
	goVersion := fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if len(vcs) == 0 {
		return fmt.Sprintf("domainclass %s (%s)", version, goVersion)
	}
	return fmt.Sprintf("domainclass %s (%s; %s)", version, strings.Join(vcs, ", "), goVersion)
}

// versionOptions is `domainclass version`.
type versionOptions struct {
	*base
	invocation
}

func (c *base) versionCommand() *cobra.Command {
	return command(&cobra.Command{
		Use:   "version",
		Short: "print the version, the revision it was built from and the Go version (also --version)",
	}, &versionOptions{base: c})
}

func (o *versionOptions) Validate() error { return o.noArgs() }

func (o *versionOptions) Run(ctx context.Context) error {
	_, err := fmt.Fprintln(o.stdout, versionText(cmp.Or(o.version, "dev")))
	return err
}
