package search

import (
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
	return classifier.Evidence{Provider: ProviderHomepage, Text: text, Sources: []string{resp.Request.URL.String()}}, nil
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

// ExtractPage reads an HTML document: its title, its meta description
// (or og:description), and its visible text with whitespace folded.
func ExtractPage(r io.Reader) Page {
	var (
		p        Page
		text     strings.Builder
		skip     int // depth inside script, style and similar
		inTitle  bool
		tokenize = html.NewTokenizer(r)
	)
	for {
		switch tokenize.Next() {
		case html.ErrorToken:
			p.Text = fold(text.String())
			p.Title = fold(p.Title)
			return p
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := tokenize.TagName()
			switch tag := string(name); tag {
			case "script", "style", "noscript", "template", "svg", "iframe":
				if tokenize.Token().Type == html.StartTagToken {
					skip++
				}
			case "title":
				inTitle = true
			case "meta":
				if hasAttr {
					readMeta(tokenize, &p)
				}
			case "br", "p", "div", "li", "h1", "h2", "h3", "h4", "section", "td":
				text.WriteByte(' ')
			}
		case html.EndTagToken:
			name, _ := tokenize.TagName()
			switch string(name) {
			case "script", "style", "noscript", "template", "svg", "iframe":
				if skip > 0 {
					skip--
				}
			case "title":
				inTitle = false
			}
		case html.TextToken:
			if skip > 0 {
				continue
			}
			t := string(tokenize.Text())
			if inTitle {
				p.Title += t
				continue
			}
			text.WriteString(t)
			text.WriteByte(' ')
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
		p.Description = fold(content)
	}
}

func fold(s string) string { return strings.Join(strings.Fields(s), " ") }
