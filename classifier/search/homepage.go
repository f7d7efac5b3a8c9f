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
	pr := pageReader{tokenize: html.NewTokenizer(r)}
	for {
		switch tt := pr.tokenize.Next(); tt {
		case html.ErrorToken:
			pr.p.Text = fold(pr.text.String())
			pr.p.Title = classifier.Truncate(fold(pr.p.Title), maxField)
			return pr.p
		case html.StartTagToken, html.SelfClosingTagToken:
			pr.startTag(tt)
		case html.EndTagToken:
			pr.endTag()
		case html.TextToken:
			pr.addText()
		}
	}
}

// pageReader is ExtractPage's state between tokens.
type pageReader struct {
	tokenize *html.Tokenizer
	p        Page
	text     strings.Builder
	skip     int    // depth inside script, style and similar
	hidden   string // the tag of the hidden element we are inside, "" when none
	depth    int    // nesting of that tag inside itself
	inTitle  bool
}

// startTag follows a start (or self-closing) tag of type tt: into a hidden
// or skipped element, the title, a meta tag, or a break in the text.
func (pr *pageReader) startTag(tt html.TokenType) {
	name, hasAttr := pr.tokenize.TagName()
	tag := string(name)
	if pr.hidden != "" {
		if tag == pr.hidden && tt == html.StartTagToken {
			pr.depth++
		}
		return
	}
	switch tag {
	case "script", "style", "noscript", "template", "svg", "iframe":
		if tt == html.StartTagToken {
			pr.skip++
		}
		return
	case "title":
		pr.inTitle = true
		return
	case "meta":
		if hasAttr {
			readMeta(pr.tokenize, &pr.p)
		}
		return
	}
	if hasAttr && tt == html.StartTagToken && !voidElements[tag] && isHidden(pr.tokenize) {
		pr.hidden, pr.depth = tag, 1
		return
	}
	switch tag {
	case "br", "p", "div", "li", "h1", "h2", "h3", "h4", "section", "td":
		pr.text.WriteByte(' ')
	}
}

// endTag follows an end tag out of a hidden or skipped element or the
// title.
func (pr *pageReader) endTag() {
	name, _ := pr.tokenize.TagName()
	tag := string(name)
	if pr.hidden != "" {
		if tag == pr.hidden {
			if pr.depth--; pr.depth == 0 {
				pr.hidden = ""
			}
		}
		return
	}
	switch tag {
	case "script", "style", "noscript", "template", "svg", "iframe":
		if pr.skip > 0 {
			pr.skip--
		}
	case "title":
		pr.inTitle = false
	}
}

// addText keeps a text token a visitor sees, in the title or the text.
func (pr *pageReader) addText() {
	if pr.skip > 0 || pr.hidden != "" {
		return
	}
	t := string(pr.tokenize.Text())
	if pr.inTitle {
		if len(pr.p.Title) < 4*maxField {
			pr.p.Title += t
		}
		return
	}
	pr.text.WriteString(t)
	pr.text.WriteByte(' ')
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
