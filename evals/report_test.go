package evals_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/evals"
)

// TestReport_MarkdownOfHostileText: a report shows what models and web
// pages wrote (a miss's reasoning, the titles and addresses of its
// evidence). In a Markdown viewer none of it may become HTML or a link
// that runs script: HTML is escaped, and only http(s) addresses are links.
func TestReport_MarkdownOfHostileText(t *testing.T) {
	t.Parallel()
	r := &evals.Report{Classifier: "cpg", Repeat: 1, Gate: "none",
		Images: evals.Images{AccuracyVsCost: "cost.png", AccuracyVsLatency: "latency.png"}, Scores: []evals.Score{{Name: "m", FalseNegatives: []evals.Miss{{
			Domain: "evil.com", Kind: "<b>kind</b>", Times: 1, Of: 1, Search: "brave",
			Reason: "<img src=x onerror=alert(1)> [click](javascript:alert(2)) ![i](https://evil.example/t.png) &lt;script&gt;\x1b[31m",
			Evidence: []classifier.EvidenceItem{
				{URL: "javascript:alert(3)", Title: "Evil", Snippet: "<script>alert(4)</script>"},
				{URL: "data:text/html,<script>alert(5)</script>", Title: "Data"},
				{URL: "JavaScript:alert(7)", Title: "Shouting"},
				{URL: "https://acme.com/a>b)c", Title: "Acme [x](javascript:alert(6))"},
			},
		}}}}}
	md := r.Markdown()
	lower := strings.ToLower(md)
	for _, tag := range []string{"<img", "<script", "<b>"} {
		require.NotContains(t, lower, tag, "HTML from a model or a page is escaped")
	}
	require.NotContains(t, md, "\x1b")
	// Every link (an unescaped "](") goes to an http(s) address or to one of
	// the report's own pictures.
	links := regexp.MustCompile(`(^|[^\\])\]\(<?([^)>]*)`).FindAllStringSubmatch(md, -1)
	require.NotEmpty(t, links)
	for _, l := range links {
		target := l[2]
		ok := strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") || strings.HasSuffix(target, ".png")
		require.True(t, ok, "a link to %q in:\n%s", target, md)
	}
	require.Contains(t, md, "- [Acme \\[x\\](javascript:alert(6))](<https://acme.com/a%3Eb)c>)", "an http(s) address stays a link")
	require.Contains(t, md, "Evil (not a web address, no link)")
	require.Contains(t, md, "&lt;img src=x onerror=alert(1)&gt;", "the reason is shown, as text")
}
