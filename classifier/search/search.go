// Package search gathers web evidence about a domain for the model:
// "none", "homepage" (the site's own page) and "brave" (Brave Search API).
package search

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/netguard"
)

// Providers by name.
const (
	ProviderNone     = "none"
	ProviderHomepage = "homepage"
	ProviderBrave    = "brave"
)

// DefaultTimeout bounds one search or homepage fetch: evidence that takes
// longer than 10 s is skipped rather than holding up the domain (and a
// worker slot) for it. A reviewed setting: change it in a reviewed commit,
// or per deployment through the environment.
const DefaultTimeout = 10 * time.Second

// Config selects and configures a provider.
type Config struct {
	Provider string
	// Timeout bounds one search; 0 is DefaultTimeout.
	Timeout      time.Duration
	AllowPrivate bool // homepage: allow private addresses (tests, local)
	BraveAPIKey  string
	BraveBaseURL string
	UserAgent    string
	// Conns is how many searches may run at once: that many idle
	// connections to a provider are kept (llm.KeepConns). 0: two.
	Conns int
}

// New returns the configured provider. It returns an error for an unknown
// provider name or a brave provider without a key.
func New(cfg Config) (classifier.Searcher, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch cfg.Provider {
	case ProviderNone, "":
		return None{}, nil
	case ProviderHomepage:
		d := &netguard.Dialer{AllowPrivate: cfg.AllowPrivate, Timeout: cfg.Timeout}
		return &Homepage{Client: d.Client(cfg.Timeout, 5), Timeout: cfg.Timeout, UserAgent: cfg.UserAgent}, nil
	case ProviderBrave:
		if cfg.BraveAPIKey == "" {
			return nil, fmt.Errorf("the brave search provider needs an API key")
		}
		return &Brave{BaseURL: cfg.BraveBaseURL, APIKey: cfg.BraveAPIKey, Timeout: cfg.Timeout,
			Client: &http.Client{Timeout: cfg.Timeout, Transport: llm.KeepConns(cfg.Conns)}}, nil
	}
	return nil, fmt.Errorf("unknown SEARCH_PROVIDER %q (want none, homepage or brave)", cfg.Provider)
}

// None finds nothing: the model answers from what it knows.
type None struct{}

// Search returns empty evidence.
func (None) Search(context.Context, string) (classifier.Evidence, error) {
	return classifier.Evidence{Provider: ProviderNone}, nil
}
