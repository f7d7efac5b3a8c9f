// Package deploy holds what operators deploy beside the binary: Prometheus
// alerting rules and a Grafana dashboard. Its tests run the real tools.
package deploy

import (
	"os"
	"os/exec"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/dbtest"
)

// promtool finds Debian's promtool (`go tool task test` installs the
// prometheus package when it runs as root and it is missing).
func promtool(t *testing.T) string {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool on this machine; `go tool task test` installs Debian's prometheus when run as root")
	}
	return path
}

// TestAlertRules checks the rules and runs their unit tests: every alert
// fires on its synthetic series and stays quiet on a healthy service's.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	out, err := dbtest.RunTool(exec.Command(bin, "check", "rules", "prometheus/alerts.yaml"), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	out, err = dbtest.RunTool(exec.Command(bin, "test", "rules", "prometheus/alerts_test.yaml"), dbtest.BudgetTool)
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestEveryAlertHasAFiringAndAQuietCase keeps alerts_test.yaml complete as
// rules are added: each alert is expected to fire in one test and to stay
// quiet in another.
func TestEveryAlertHasAFiringAndAQuietCase(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for path, out := range map[string]any{"prometheus/alerts.yaml": &rules, "prometheus/alerts_test.yaml": &tests} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, out), path)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			require.True(t, fires[r.Alert], "%s has no case where it fires", r.Alert)
			require.True(t, quiet[r.Alert], "%s has no case where it stays quiet", r.Alert)
		}
	}
	require.Positive(t, n)
}
