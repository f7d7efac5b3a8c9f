package search

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/netguard"
)

// Brave asks the Brave Search API about the domain and keeps the top
// results' titles and descriptions.
type Brave struct {
	BaseURL string // default https://api.search.brave.com
	APIKey  string
	Count   int // results to keep (default 5)
	Timeout time.Duration
	Client  *http.Client
}

type braveResponse struct {
	Web struct {
		Results []struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		} `json:"results"`
	} `json:"web"`
}

// Search returns the top results. A 429 comes back with the provider's
// Retry-After (the job is snoozed); 5xx and network errors are transient; a
// rejected request (bad key, bad query) is permanent.
func (b *Brave) Search(ctx context.Context, domain string) (classifier.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	base := b.BaseURL
	if base == "" {
		base = "https://api.search.brave.com"
	}
	count := b.Count
	if count <= 0 {
		count = 5
	}
	q := url.Values{"q": {domain}, "count": {fmt.Sprint(count)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/res/v1/web/search?"+q.Encode(), nil)
	if err != nil {
		return classifier.Evidence{}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", b.APIKey)
	resp, err := b.Client.Do(req)
	if err != nil {
		return classifier.Evidence{}, fmt.Errorf("brave search failed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 2<<20))
	if err != nil {
		return classifier.Evidence{}, fmt.Errorf("brave search failed: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		after, ok := netguard.ParseRetryAfter(resp.Header, time.Now())
		if !ok {
			after = time.Second // Brave's plans are per-second limits
		}
		return classifier.Evidence{}, &ThrottledError{After: after}
	case resp.StatusCode >= 500:
		return classifier.Evidence{}, fmt.Errorf("brave search failed: status %d", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return classifier.Evidence{}, &RejectedError{Status: resp.StatusCode}
	}
	var br braveResponse
	if err := json.Unmarshal(body, &br); err != nil {
		return classifier.Evidence{}, fmt.Errorf("brave search returned unreadable JSON: %w", err)
	}
	ev := classifier.Evidence{Provider: ProviderBrave}
	var text strings.Builder
	for _, r := range br.Web.Results {
		if len(ev.Sources) == count {
			break
		}
		// A result whose address cannot be kept is left out of the
		// prompt too: a 1.5 MB address would fill it.
		if why := classifier.EvidenceURLProblem(r.URL); why != "" {
			ev.Dropped = append(ev.Dropped, why)
			continue
		}
		title, description := fold(stripTags(r.Title)), fold(stripTags(r.Description))
		fmt.Fprintf(&text, "- %s: %s (%s)\n", title, description, r.URL)
		ev.Sources = append(ev.Sources, classifier.NewEvidenceItem(r.URL, title, description))
	}
	ev.Text = strings.TrimSpace(text.String())
	return ev, nil
}

// stripTags removes the <strong> highlighting Brave puts in descriptions.
func stripTags(s string) string {
	return strings.NewReplacer("<strong>", "", "</strong>", "").Replace(s)
}

// ThrottledError is a search provider's 429.
type ThrottledError struct{ After time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("search provider throttled (retry after %s)", e.After)
}

// RetryAfter is how long the provider asked us to wait.
func (e *ThrottledError) RetryAfter() time.Duration { return e.After }

// RejectedError is a search request the provider will not serve.
type RejectedError struct{ Status int }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("search provider rejected the request: %d %s", e.Status, http.StatusText(e.Status))
}

// Permanent reports that retrying does not help.
func (e *RejectedError) Permanent() bool { return true }
