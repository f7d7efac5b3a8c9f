package search

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/domainclass/domainclass/classifier"
)

// Homepage fetches the company's own home page and keeps its title,
// description and the start of its visible text. A site that cannot be
// fetched is not an error: the model then answers without evidence.
type Homepage struct {
	// Client must refuse private addresses at connect time (netguard).
	Client *http.Client
	// URLs returns the addresses to try, in order; the default is
	// https://domain/, https://www.domain/, http://domain/.
	URLs      func(domain string) []string
	Timeout   time.Duration
	MaxBytes  int64 // read at most this much of a page (default 512 KiB)
	MaxText   int   // keep at most this many characters of text (default 1500)
	UserAgent string
}

// Search fetches the first address that answers with HTML.
func (h *Homepage) Search(ctx context.Context, domain string) (classifier.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	urls := defaultURLs
	if h.URLs != nil {
		urls = h.URLs
	}
	for _, u := range urls(domain) {
		if ev, err := h.fetch(ctx, u); err == nil {
			return ev, nil
		} else if ctx.Err() != nil {
			break
		}
	}
	return classifier.Evidence{Provider: ProviderHomepage}, nil
}

func defaultURLs(domain string) []string {
	return []string{"https://" + domain + "/", "https://www." + domain + "/", "http://" + domain + "/"}
}

func (h *Homepage) fetch(ctx context.Context, url string) (classifier.Evidence, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return classifier.Evidence{}, err
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5")
	if h.UserAgent != "" {
		req.Header.Set("User-Agent", h.UserAgent)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return classifier.Evidence{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return classifier.Evidence{}, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "text/html" && mt != "application/xhtml+xml" {
		return classifier.Evidence{}, fmt.Errorf("%s: not HTML (%s)", url, mt)
	}
	maxBytes := h.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 512 << 10
	}
	maxText := h.MaxText
	if maxText <= 0 {
		maxText = 1500
	}
	page := ExtractPage(io.LimitReader(resp.Body, maxBytes))
	text := page.Evidence(maxText)
	if text == "" {
		return classifier.Evidence{}, fmt.Errorf("%s: no text", url)
	}
	item := classifier.NewEvidenceItem(resp.Request.URL.String(), page.Title, cmp.Or(page.Description, page.Text))
	return classifier.Evidence{Provider: ProviderHomepage, Text: text, Sources: []classifier.EvidenceItem{item}}, nil
}

// Page is what a home page says about itself.
type Page struct {
	Title       string
	Description string
	Text        string
}

// Evidence renders the page for a prompt, at most max characters of text.
func (p Page) Evidence(max int) string {
	var b strings.Builder
	if p.Title != "" {
		b.WriteString("Title: " + p.Title + "\n")
	}
	if p.Description != "" {
		b.WriteString("Description: " + p.Description + "\n")
	}
	if p.Text != "" {
		text := p.Text
		if r := []rune(text); len(r) > max {
			text = string(r[:max]) + "…"
		}
		b.WriteString("Text: " + text)
	}
	return strings.TrimSpace(b.String())
}

// maxField caps a page's title and description: a real one is a line, and
// a page that stuffs either must not fill the prompt with it.
const maxField = 300

// ExtractPage reads an HTML document: its title, its meta description
// (or og:description), and its visible text with whitespace folded. Text a
// visitor does not see is left out: scripts, styles, <noscript>,
// <template>, comments, and elements marked hidden (the hidden attribute,
// aria-hidden="true", or an inline style with display:none or
// visibility:hidden), which is where a page hides instructions for a model.
func ExtractPage(r io.Reader) Page {
	var (
		p        Page
		text     strings.Builder
		skip     int    // depth inside script, style and similar
		hidden   string // the tag of the hidden element we are inside, "" when none
		depth    int    // nesting of that tag inside itself
		inTitle  bool
		tokenize = html.NewTokenizer(r)
	)
	for {
		tt := tokenize.Next()
		switch tt {
		case html.ErrorToken:
			p.Text = fold(text.String())
			p.Title = classifier.Truncate(fold(p.Title), maxField)
			return p
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := tokenize.TagName()
			tag := string(name)
			if hidden != "" {
				if tag == hidden && tt == html.StartTagToken {
					depth++
				}
				continue
			}
			switch tag {
			case "script", "style", "noscript", "template", "svg", "iframe":
				if tt == html.StartTagToken {
					skip++
				}
				continue
			case "title":
				inTitle = true
				continue
			case "meta":
				if hasAttr {
					readMeta(tokenize, &p)
				}
				continue
			}
			if hasAttr && tt == html.StartTagToken && !voidElements[tag] && isHidden(tokenize) {
				hidden, depth = tag, 1
				continue
			}
			switch tag {
			case "br", "p", "div", "li", "h1", "h2", "h3", "h4", "section", "td":
				text.WriteByte(' ')
			}
		case html.EndTagToken:
			name, _ := tokenize.TagName()
			tag := string(name)
			if hidden != "" {
				if tag == hidden {
					if depth--; depth == 0 {
						hidden = ""
					}
				}
				continue
			}
			switch tag {
			case "script", "style", "noscript", "template", "svg", "iframe":
				if skip > 0 {
					skip--
				}
			case "title":
				inTitle = false
			}
		case html.TextToken:
			if skip > 0 || hidden != "" {
				continue
			}
			t := string(tokenize.Text())
			if inTitle {
				if len(p.Title) < 4*maxField {
					p.Title += t
				}
				continue
			}
			text.WriteString(t)
			text.WriteByte(' ')
		}
	}
}

// voidElements have no end tag, so they cannot hide anything inside them.
var voidElements = map[string]bool{"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "source": true, "track": true, "wbr": true}

// isHidden reads the current start tag's attributes: hidden,
// aria-hidden="true", or a style that hides it.
func isHidden(z *html.Tokenizer) bool {
	hidden := false
	for {
		key, val, more := z.TagAttr()
		switch k := strings.ToLower(string(key)); k {
		case "hidden":
			hidden = true
		case "aria-hidden":
			hidden = hidden || strings.EqualFold(strings.TrimSpace(string(val)), "true")
		case "style":
			style := strings.ReplaceAll(strings.ToLower(string(val)), " ", "")
			hidden = hidden || strings.Contains(style, "display:none") || strings.Contains(style, "visibility:hidden")
		}
		if !more {
			return hidden
		}
	}
}

func readMeta(z *html.Tokenizer, p *Page) {
	var name, content string
	for {
		key, val, more := z.TagAttr()
		switch strings.ToLower(string(key)) {
		case "name", "property":
			name = strings.ToLower(string(val))
		case "content":
			content = string(val)
		}
		if !more {
			break
		}
	}
	if (name == "description" || name == "og:description") && p.Description == "" {
		p.Description = classifier.Truncate(fold(content), maxField)
	}
}

func fold(s string) string { return strings.Join(strings.Fields(s), " ") }
