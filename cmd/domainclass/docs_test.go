package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory (where go
// test runs).
const repoRoot = "../.."

// TestDocs keeps the documents true to the code and to one another: the
// webhook receiver of docs/webhooks.md is the one jobs.Example_receiver
// runs, and every relative link in README.md, docs/*.md and evals/README.md
// leads to a file that exists (and, for a #heading in a Markdown file, to a
// heading that exists).
func TestDocs(t *testing.T) {
	t.Parallel()

	t.Run("receiver", func(t *testing.T) {
		t.Parallel()
		doc := readDoc(t, "docs/webhooks.md")
		example := readDoc(t, "jobs/example_webhook_test.go")
		for _, fn := range []string{"func verify(", "func receive("} {
			inDoc, inExample := funcBlock(t, "docs/webhooks.md", doc, fn), funcBlock(t, "jobs/example_webhook_test.go", example, fn)
			if inDoc != inExample {
				t.Errorf("%s... in docs/webhooks.md differs from the one in jobs/example_webhook_test.go (tested as jobs.Example_receiver); make them the same.\ndocs/webhooks.md:\n%s\njobs/example_webhook_test.go:\n%s",
					fn, inDoc, inExample)
			}
		}
	})

	t.Run("links", func(t *testing.T) {
		t.Parallel()
		docs := []string{"README.md", "evals/README.md"}
		more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range more {
			rel, err := filepath.Rel(repoRoot, m)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		anchors := map[string]map[string]bool{} // Markdown file (as opened) → its heading slugs
		anchorsOf := func(file string) map[string]bool {
			if a, ok := anchors[file]; ok {
				return a
			}
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a := markdownAnchors(string(text))
			anchors[file] = a
			return a
		}
		checked := 0
		for _, doc := range docs {
			file := filepath.Join(repoRoot, filepath.FromSlash(doc))
			text := readDoc(t, doc)
			for _, l := range markdownLinks(text) {
				target, anchor, _ := strings.Cut(l.target, "#")
				if isExternal(target) {
					continue
				}
				checked++
				path := file // a bare #anchor is a heading of this document
				if target != "" {
					p, err := url.PathUnescape(target)
					if err != nil {
						t.Errorf("%s:%d: link %q: %v", doc, l.line, l.target, err)
						continue
					}
					if strings.HasPrefix(p, "/") {
						path = filepath.Join(repoRoot, filepath.FromSlash(p))
					} else {
						path = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
					}
				}
				if _, err := os.Stat(path); err != nil {
					rel, _ := filepath.Rel(repoRoot, path)
					t.Errorf("%s:%d: link %q: %s does not exist", doc, l.line, l.target, filepath.ToSlash(rel))
					continue
				}
				if anchor != "" && strings.HasSuffix(strings.ToLower(path), ".md") && !anchorsOf(path)[anchor] {
					rel, _ := filepath.Rel(repoRoot, path)
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", doc, l.line, l.target, filepath.ToSlash(rel), anchor)
				}
			}
		}
		if checked == 0 {
			t.Error("no relative links found: the link parser is broken")
		}
	})
}

// readDoc reads a file of the repository, named relative to its root.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// funcBlock returns the lines of text from the one line that starts with
// prefix to the first line that is a lone "}" (a top-level Go function).
func funcBlock(t *testing.T, name, text, prefix string) string {
	t.Helper()
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	start := -1
	for i, line := range lines {
		if strings.HasPrefix(line, prefix) {
			if start >= 0 {
				t.Fatalf("%s has %q twice (lines %d and %d)", name, prefix, start+1, i+1)
			}
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("%s has no line starting with %q", name, prefix)
	}
	for i := start + 1; i < len(lines); i++ {
		if lines[i] == "}" {
			return strings.Join(lines[start:i+1], "\n")
		}
	}
	t.Fatalf("%s: %q on line %d is never closed by a lone }", name, prefix, start+1)
	return ""
}

type mdLink struct {
	line   int
	target string
}

var (
	fenceRe      = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	codeSpanRe   = regexp.MustCompile("`+[^`]*`+")
	inlineLinkRe = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRe     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	headingRe    = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	htmlAnchorRe = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	schemeRe     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownLinks returns the targets of the inline links, images and link
// reference definitions of a Markdown text, outside code blocks and code
// spans.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	forProse(text, func(n int, line string) {
		if m := refDefRe.FindStringSubmatch(line); m != nil {
			links = append(links, mdLink{n, m[1]})
			return
		}
		for _, m := range inlineLinkRe.FindAllStringSubmatch(codeSpanRe.ReplaceAllString(line, ""), -1) {
			links = append(links, mdLink{n, m[1]})
		}
	})
	return links
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown text (a repeated heading gets -1, -2, ...), and those of HTML
// anchors.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forProse(text, func(_ int, line string) {
		for _, m := range htmlAnchorRe.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors
}

// forProse calls f with every line (numbered from 1) outside fenced code
// blocks.
func forProse(text string, f func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(line) == m[1]:
				fence = ""
				continue
			}
		}
		if fence == "" {
			f(i+1, line)
		}
	}
}

// slug is GitHub's anchor of a heading: its text without link targets,
// lowercased, with everything but letters, digits, marks, "_", "-" and
// spaces dropped, and spaces turned into "-".
func slug(heading string) string {
	heading = inlineLinkRe.ReplaceAllStringFunc(heading, func(l string) string {
		text, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(l, "!"), "["), "](")
		return text
	})
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isExternal says whether a link target leaves the repository (a URL with a
// scheme, or a protocol-relative one).
func isExternal(target string) bool {
	return schemeRe.MatchString(target) || strings.HasPrefix(target, "//")
}
