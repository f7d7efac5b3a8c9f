package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDocsDefaults keeps the defaults the documents state for environment
// variables equal to the code's: every variable of config.go's table is
// named in operating.md, the Configuration table's defaults are
// DefaultConfig's, and wherever README.md or docs/*.md write a variable
// followed by a value in parentheses — "`JOB_RETENTION` (30 days)" — the
// value is its default, unless the parentheses say it is not ("here", "in
// the drill", "by default" beside another value).
func TestDocsDefaults(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	defaults := map[string]any{} // name → the default's value
	for _, v := range cfg.environment() {
		defaults[v.Name] = settingValue(v.Setting)
	}

	t.Run("named", func(t *testing.T) {
		t.Parallel()
		doc := readDoc(t, "docs/operating.md")
		for name := range defaults {
			if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+name+"=") {
				t.Errorf("%s is read from the environment (config.go) but docs/operating.md never names it", name)
			}
		}
	})

	t.Run("table", func(t *testing.T) {
		t.Parallel()
		checked := 0
		for _, row := range configTableRows(t) {
			names := backticked(row.names)
			for _, n := range names {
				if _, ok := defaults[n]; !ok {
					t.Errorf("docs/operating.md:%d: the Configuration table documents %s, which config.go does not read", row.line, n)
				}
			}
			first, _, _ := strings.Cut(row.def, ";") // what follows ";" qualifies it
			values := strings.Split(first, ", ")
			if len(values) != len(names) {
				continue // one default said for several names, or a sentence
			}
			for i, n := range names {
				if d, ok := defaults[n]; ok {
					if msg := sameValue(d, values[i]); msg != "" {
						t.Errorf("docs/operating.md:%d: %s's default is %s in the Configuration table; %s", row.line, n, strings.TrimSpace(values[i]), msg)
					}
					checked++
				}
			}
		}
		if checked < 20 {
			t.Errorf("only %d defaults read from the Configuration table: its parser is broken", checked)
		}
	})

	t.Run("prose", func(t *testing.T) {
		t.Parallel()
		docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, filepath.Join(repoRoot, "README.md"))
		checked := 0
		for _, path := range docs {
			rel, _ := filepath.Rel(repoRoot, path)
			forProse(readDoc(t, filepath.ToSlash(rel)), func(n int, line string) {
				for _, m := range proseDefaultRe.FindAllStringSubmatch(line, -1) {
					d, ok := defaults[m[1]]
					if !ok || notTheDefault.MatchString(m[2]) {
						continue
					}
					if msg := sameValue(d, m[2]); msg != "" {
						t.Errorf("%s:%d: `%s` (%s): %s", filepath.ToSlash(rel), n, m[1], m[2], msg)
					}
					checked++
				}
			})
		}
		if checked < 20 {
			t.Errorf("only %d defaults read from the prose: its pattern is broken", checked)
		}
	})
}

var (
	// "`NAME` (value…)", where the value starts with a number.
	proseDefaultRe = regexp.MustCompile("`([A-Z][A-Z0-9_]+)` \\((?:default )?([0-9][^)]*)\\)")
	// Parentheses that give another value than the default, on purpose.
	notTheDefault = regexp.MustCompile(`\b(here|drill|bench|by default|e\.g\.|for example)\b`)
	backtickRe    = regexp.MustCompile("`([^`]+)`")
	numberUnitRe  = regexp.MustCompile(`^([0-9][0-9,]*(?:\.[0-9]+)?)\s*([A-Za-z/]*)`)
)

type configRow struct {
	line  int
	names string
	def   string
}

// configTableRows returns the rows of operating.md's Configuration table.
func configTableRows(t *testing.T) []configRow {
	t.Helper()
	var rows []configRow
	in := false
	for i, line := range strings.Split(readDoc(t, "docs/operating.md"), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Configuration"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			if len(cells) >= 4 {
				rows = append(rows, configRow{line: i + 1, names: cells[1], def: strings.TrimSpace(cells[2])})
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal(`docs/operating.md has no "## Configuration" table`)
	}
	return rows
}

func backticked(s string) []string {
	var out []string
	for _, m := range backtickRe.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// settingValue is the value a setting pointer points to.
func settingValue(p any) any {
	switch p := p.(type) {
	case *string:
		return *p
	case *bool:
		return *p
	case *int:
		return int64(*p)
	case *int32:
		return int64(*p)
	case *int64:
		return *p
	case *time.Duration:
		return *p
	case *[]time.Duration:
		return *p
	}
	panic(fmt.Sprintf("a setting of type %T", p))
}

// sameValue says how the documented text differs from the default d, or ""
// when it is d, or when the text states no value this can read (a dash, a
// sentence, a list of durations).
func sameValue(d any, text string) string {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "`") {
		if m := backtickRe.FindStringSubmatch(text); m != nil {
			text = m[1]
		}
	}
	switch d := d.(type) {
	case string:
		if d == "" || !strings.HasPrefix(strings.TrimSpace(text), text) || strings.ContainsAny(text, " (") {
			return ""
		}
		if text != d {
			return fmt.Sprintf("the code's default is %q", d)
		}
	case bool:
		if b, err := strconv.ParseBool(text); err == nil && b != d {
			return fmt.Sprintf("the code's default is %t", d)
		}
	case int64:
		n, unit, ok := docNumber(text)
		if !ok {
			return ""
		}
		switch strings.ToLower(unit) {
		case "kib", "kib/s":
			n *= 1 << 10
		case "mib", "mib/s":
			n *= 1 << 20
		}
		if int64(n) != d {
			return fmt.Sprintf("the code's default is %d", d)
		}
	case time.Duration:
		if v, err := time.ParseDuration(text); err == nil {
			if v != d {
				return fmt.Sprintf("the code's default is %s", d)
			}
			return ""
		}
		n, unit, ok := docNumber(text)
		if !ok {
			return ""
		}
		per, ok := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "sec": time.Second, "seconds": time.Second,
			"second": time.Second, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute, "h": time.Hour,
			"hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[strings.ToLower(unit)]
		if !ok {
			return ""
		}
		if v := time.Duration(n * float64(per)); v != d {
			return fmt.Sprintf("the code's default is %s", d)
		}
	}
	return ""
}

// docNumber reads "30 days", "8 KiB/s", "2,048", "1.5s": the number and
// the unit after it.
func docNumber(text string) (float64, string, bool) {
	m := numberUnitRe.FindStringSubmatch(text)
	if m == nil {
		return 0, "", false
	}
	n, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	return n, m[2], err == nil
}
