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
