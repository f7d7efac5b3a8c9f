package main

import (
	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/search"
)

// The model and the search providers, built the same way for the workers
// and for eval.

// newLLMClient returns the OPENAI_* model client, without bounds; feedback,
// when set, hears what the provider says of the account's limits.
func (c Config) newLLMClient(observer llm.Observer, feedback llm.Feedback) (*llm.Client, error) {
	return llm.New(llm.Config{
		BaseURL: c.OpenAIBaseURL, APIKey: c.OpenAIAPIKey, Timeout: c.LLMTimeout,
		Observer: observer, Feedback: feedback, Conns: c.modelConns(),
	})
}

// newSearcher returns the search provider called name (SEARCH_PROVIDER for
// the workers; eval compares several).
func (c Config) newSearcher(name string) (classifier.Searcher, error) {
	return search.New(search.Config{
		Provider: name, AllowPrivate: c.SearchAllowPrivate,
		BraveAPIKey: c.BraveAPIKey, BraveBaseURL: c.BraveBaseURL, UserAgent: userAgent(), Conns: c.modelConns(),
	})
}

func userAgent() string { return "domainclass/" + Version }
