package envvar_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/internal/envvar"
)

// TestRead: each kind of setting is read from its variable, a variable not
// set keeps its default, and every value that cannot be read is named in
// one error; Rename puts the variables' names in an owner's message.
func TestRead(t *testing.T) {
	t.Parallel()
	var (
		s, kept  = "", "default"
		b        bool
		n        int
		n32      int32
		n64      int64
		d        time.Duration
		schedule []time.Duration
	)
	vars := []envvar.Var{
		{"S", &s, ""}, {"KEPT", &kept, ""}, {"B", &b, ""}, {"N", &n, "Workers"}, {"N32", &n32, ""}, {"N64", &n64, ""},
		{"D", &d, "Timeout"}, {"SCHEDULE", &schedule, ""},
	}
	env, err := envvar.Read(vars, []string{"S=a=b", "B=true", "N=7", "N32=-3", "N64=9000000000", "D=1m30s",
		"SCHEDULE=0s, 5s,5m", "OTHER=x"})
	require.NoError(t, err)
	require.Equal(t, "x", env["OTHER"])
	require.Equal(t, []any{"a=b", "default", true, 7, int32(-3), int64(9000000000), 90 * time.Second},
		[]any{s, kept, b, n, n32, n64, d})
	require.Equal(t, []time.Duration{0, 5 * time.Second, 5 * time.Minute}, schedule)

	_, err = envvar.Read(vars, []string{"N=seven", "N32=3000000000", "D=1", "SCHEDULE=0s,x"})
	require.EqualError(t, err, `invalid N: strconv.Atoi: parsing "seven": invalid syntax; `+
		`invalid N32: strconv.ParseInt: parsing "3000000000": value out of range; `+
		`invalid D: time: missing unit in duration "1"; invalid SCHEDULE: time: invalid duration "x"`)

	require.Equal(t, "N must be at least 1 and D positive (Workers2 is not a field)",
		envvar.Rename("Workers must be at least 1 and Timeout positive (Workers2 is not a field)", vars))
}

// TestUnread: a variable no longer read, when the environment still sets
// it, gets one line that says so and what replaces it; one not set gets
// none, and nothing else is said.
func TestUnread(t *testing.T) {
	t.Parallel()
	removed := []envvar.Removed{
		{Name: "MAX_SNOOZE", Instead: "a reviewed constant (10m)"},
		{Name: "API_DB_MAX_CONNS", Instead: "DB_MAX_CONNS"},
	}
	env, err := envvar.Read(nil, []string{"MAX_SNOOZE=1m", "OTHER=x"})
	require.NoError(t, err)
	require.Equal(t, []string{"MAX_SNOOZE is no longer read, and its value is ignored: a reviewed constant (10m)"},
		envvar.Unread(removed, env))
	require.Empty(t, envvar.Unread(removed, map[string]string{"OTHER": "x"}))
}
