// Package envvar reads a table of environment variables into the settings
// they override. The binary keeps the one table (cmd/domainclass,
// config.go); the settings, their defaults and their checks stay with
// their owners, whose messages name their fields: Rename puts the
// variables' names in their place.
package envvar

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Var binds one environment variable to the setting it overrides. Field is
// the setting's name in its owner's validation messages, so that an error
// names the variable the operator set. It is an alias of a struct type, so
// that a table reads as rows ({"NAME", &setting, "Field"}), as it would in
// the table's own package.
type Var = struct {
	Name    string
	Setting any // a pointer: *string, *bool, *int, *int32, *int64, *time.Duration, *[]time.Duration
	Field   string
}

// Read sets each variable of vars that environ ("NAME=value" pairs) holds,
// and returns environ as a map. It returns one error naming every
// variable whose value cannot be read.
func Read(vars []Var, environ []string) (map[string]string, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var errs []string
	for _, v := range vars {
		if s, ok := env[v.Name]; ok {
			if err := set(v.Setting, s); err != nil {
				errs = append(errs, fmt.Sprintf("invalid %s: %v", v.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return env, errors.New(strings.Join(errs, "; "))
	}
	return env, nil
}

// Rename rewrites the settings' field names in an owner's validation
// message as the environment variables that set them.
func Rename(msg string, vars []Var) string {
	for _, v := range vars {
		if v.Field != "" {
			msg = regexp.MustCompile(`\b`+v.Field+`\b`).ReplaceAllString(msg, v.Name)
		}
	}
	return msg
}

// Renamed is a variable's old name, still read for one release after its
// renaming, and the name that replaces it.
type Renamed = struct{ Old, New string }

// WithOld returns vars with a row for each old name of renamed ahead of its
// new name's row, setting the same setting: the old name still works, and
// the new one wins when both are set. The old row has no Field, so that an
// owner's messages name the new variable.
func WithOld(vars []Var, renamed []Renamed) []Var {
	out := make([]Var, 0, len(vars)+len(renamed))
	for _, v := range vars {
		for _, r := range renamed {
			if r.New == v.Name {
				out = append(out, Var{Name: r.Old, Setting: v.Setting})
			}
		}
		out = append(out, v)
	}
	return out
}

// OldSet returns, for each old name of renamed that env sets, the line
// that says so (a process logs it once as it starts).
func OldSet(renamed []Renamed, env map[string]string) []string {
	var lines []string
	for _, r := range renamed {
		if _, ok := env[r.Old]; !ok {
			continue
		}
		line := fmt.Sprintf("%s is renamed %s: the old name is read this release only; set %s instead", r.Old, r.New, r.New)
		if _, both := env[r.New]; both {
			line = fmt.Sprintf("%s is renamed %s, which is also set and wins; remove %s", r.Old, r.New, r.Old)
		}
		lines = append(lines, line)
	}
	return lines
}

// Removed is a variable no longer read, and what now stands in its place:
// the variable it was merged into, or the reviewed constant it became.
type Removed = struct{ Name, Instead string }

// Unread returns, for each variable of removed that env still sets, the
// line that says it is ignored and what replaces it (a process logs it
// once as it starts): a value an operator set silently doing nothing
// would look like a setting that works.
func Unread(removed []Removed, env map[string]string) []string {
	var lines []string
	for _, r := range removed {
		if _, ok := env[r.Name]; ok {
			lines = append(lines, fmt.Sprintf("%s is no longer read, and its value is ignored: %s", r.Name, r.Instead))
		}
	}
	return lines
}

// set parses s into the setting p points at.
func set(p any, s string) error {
	var err error
	switch p := p.(type) {
	case *string:
		*p = s
	case *bool:
		*p, err = strconv.ParseBool(s)
	case *int:
		*p, err = strconv.Atoi(s)
	case *int64:
		*p, err = strconv.ParseInt(s, 10, 64)
	case *int32:
		var n int64
		n, err = strconv.ParseInt(s, 10, 32)
		*p = int32(n)
	case *time.Duration:
		*p, err = time.ParseDuration(s)
	case *[]time.Duration: // comma-separated: 0s,5s,5m
		var ds []time.Duration
		for _, f := range strings.Split(s, ",") {
			d, perr := time.ParseDuration(strings.TrimSpace(f))
			if perr != nil {
				return perr
			}
			ds = append(ds, d)
		}
		*p = ds
	default:
		panic(fmt.Sprintf("setting of unsupported type %T", p))
	}
	return err
}
