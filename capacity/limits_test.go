package capacity_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/capacity"
	"github.com/domainclass/domainclass/db/dbtest"
)

// named are limits named as cmd/domainclass names them, set to values.
func named(rpm, conc, procConc, procRate int) capacity.Limits {
	return capacity.Limits{
		AccountRPM:           capacity.Setting{Value: rpm, Name: "RPM_VAR"},
		AccountTPM:           capacity.Setting{Name: "TPM_VAR"},
		AccountConcurrency:   capacity.Setting{Value: conc, Name: "CONC_VAR"},
		ProcessConcurrency:   capacity.Setting{Value: procConc, Name: "PROC_CONC_VAR"},
		ProcessRatePerMinute: capacity.Setting{Value: procRate, Name: "PROC_RATE_VAR"},
	}
}

// TestCapacityLimits (issue 38, moved from cmd/domainclass): a process's
// bounds are its caps, else the account's, else 8 calls in flight; what a
// worker says of its limits names the variables it is given, and says where
// each limit came from.
func TestCapacityLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limits     capacity.Limits
		conc, rate int
	}{
		{named(0, 0, 0, 0), 8, 0},
		{named(600, 20, 0, 0), 20, 600},
		{named(600, 20, 3, 100), 3, 100},
	} {
		conc, rate := tc.limits.ProcessBounds()
		require.Equal(t, []int{tc.conc, tc.rate}, []int{conc, rate}, "%+v", tc.limits)
	}
	require.Equal(t, 8, named(600, 0, 0, 0).InFlight())
	require.Equal(t, 3, named(0, 0, 3, 0).InFlight())

	unknown := named(0, 0, 5, 0).Unknown()
	for _, want := range []string{"no limit of the model provider's account is known", "RPM_VAR, TPM_VAR and CONC_VAR are not set",
		"at most 5 model calls in flight", "(PROC_CONC_VAR)"} {
		require.Contains(t, unknown, want)
	}

	store := capacity.AccountStore{DB: dbtest.New(t).Pool, ID: "acct", Name: "fake"} // no limit stated
	logged := func(l capacity.Limits) string {
		var b strings.Builder
		l.Log(context.Background(), slog.New(slog.NewTextHandler(&b, nil)), store)
		return b.String()
	}
	none := logged(named(0, 0, 0, 0))
	require.Contains(t, none, `rpm=0 rpm_from=none`)
	require.Contains(t, none, `process_concurrency=8 process_concurrency_from="default while no limit of the account is known"`)
	require.Contains(t, none, `process_rate_per_minute=0 process_rate_from="not set"`)
	require.Contains(t, none, "level=WARN msg=\"no limit of the model provider's account is known")

	set := logged(named(600, 0, 0, 100))
	require.Contains(t, set, `account=fake`)
	require.Contains(t, set, `rpm=600 rpm_from=RPM_VAR`)
	require.Contains(t, set, `process_concurrency=0 process_concurrency_from="not set"`)
	require.Contains(t, set, `process_rate_per_minute=100 process_rate_from=PROC_RATE_VAR`)
	require.NotContains(t, set, "level=WARN")
}
