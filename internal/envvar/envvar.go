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
