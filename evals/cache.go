package evals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/domainclass/domainclass/classifier"
)

// Cache keeps raw model responses and search evidence on disk, so running
// the same candidates again costs no model call and no search.
//
// A model response is keyed on a hash of everything the model was sent
// (model name, system prompt, rendered user prompt — which holds the prompt
// version's text, the domain and the search evidence — and the response
// schema) plus the sample number of --repeat. Editing a prompt therefore
// misses the cache, as it must. Evidence is keyed on (search provider,
// domain), so every candidate of a run, and every later run, sees the same
// evidence. Only successful responses are kept: errors are asked again.
type Cache struct {
	dir string
}

// OpenCache returns a cache in dir, creating it when needed. It returns an
// error when the folder cannot be created.
func OpenCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the cache folder: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's folder.
func (c *Cache) Dir() string { return c.dir }

// cachedResponse is one model response as stored on disk.
type cachedResponse struct {
	Model            string    `json:"model"`
	Sample           int       `json:"sample"`
	Content          string    `json:"content"`
	Refusal          string    `json:"refusal,omitempty"`
	FinishReason     string    `json:"finish_reason,omitempty"`
	ResponseModel    string    `json:"response_model,omitempty"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	LatencyMS        float64   `json:"latency_ms"`
	StoredAt         time.Time `json:"stored_at"`
}

// complete returns the cached response for req and sample, or asks next
// and stores its answer; hit reports a cached answer. A hit carries the
// latency and tokens of the original call, so a rerun's report matches the
// first.
func (c *Cache) complete(ctx context.Context, next classifier.Completer, req classifier.CompletionRequest, call classifier.CallOptions, sample int) (_ classifier.CompletionResponse, hit bool, _ error) {
	key, err := responseKey(req, sample)
	if err != nil {
		return classifier.CompletionResponse{}, false, err
	}
	path := filepath.Join(c.dir, "llm", key[:2], key+".json")
	var cr cachedResponse
	if readJSON(path, &cr) == nil {
		return classifier.CompletionResponse{
			Content: cr.Content, Refusal: cr.Refusal, FinishReason: cr.FinishReason, Model: cr.ResponseModel,
			PromptTokens: cr.PromptTokens, CompletionTokens: cr.CompletionTokens,
			Latency: time.Duration(math.Round(cr.LatencyMS * float64(time.Millisecond))),
		}, true, nil
	}
	resp, err := next.Complete(ctx, req, call)
	if err != nil {
		return resp, false, err
	}
	cr = cachedResponse{
		Model: req.Model, Sample: sample, Content: resp.Content, Refusal: resp.Refusal,
		FinishReason: resp.FinishReason, ResponseModel: resp.Model, PromptTokens: resp.PromptTokens,
		CompletionTokens: resp.CompletionTokens, LatencyMS: durationMS(resp.Latency), StoredAt: time.Now().UTC(),
	}
	if err := writeJSON(path, cr); err != nil {
		return resp, false, fmt.Errorf("error caching a model response: %w", err)
	}
	return resp, false, nil
}

func responseKey(req classifier.CompletionRequest, sample int) (string, error) {
	b, err := json.Marshal(map[string]any{
		"v": 1, "model": req.Model, "system": req.System, "user": classifier.WithoutFenceIDs(req.User),
		"schema_name": req.SchemaName, "schema": req.Schema, "sample": sample,
	})
	if err != nil {
		return "", fmt.Errorf("error hashing a model request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// sharedSearcher gives every candidate of a run the same evidence for a
// domain: it searches once per (provider, domain), also when candidates ask
// at the same time, and keeps the evidence in the cache when there is one.
type sharedSearcher struct {
	provider string
	next     classifier.Searcher
	cache    *Cache // nil: remember for this run only

	group singleflight.Group
	mu    sync.Mutex
	seen  map[string]classifier.Evidence
}

func newSharedSearcher(provider string, next classifier.Searcher, cache *Cache) *sharedSearcher {
	return &sharedSearcher{provider: provider, next: next, cache: cache, seen: map[string]classifier.Evidence{}}
}

func (s *sharedSearcher) Search(ctx context.Context, domain string) (classifier.Evidence, error) {
	v, err, _ := s.group.Do(domain, func() (any, error) {
		s.mu.Lock()
		ev, ok := s.seen[domain]
		s.mu.Unlock()
		if ok {
			return ev, nil
		}
		var path string
		if s.cache != nil {
			path = filepath.Join(s.cache.dir, "search", s.provider, domain+".json")
			if readJSON(path, &ev) == nil {
				s.remember(domain, ev)
				return ev, nil
			}
		}
		ev, err := s.next.Search(ctx, domain)
		if err != nil {
			return ev, err
		}
		if path != "" {
			if err := writeJSON(path, ev); err != nil {
				return ev, fmt.Errorf("error caching search evidence: %w", err)
			}
		}
		s.remember(domain, ev)
		return ev, nil
	})
	return v.(classifier.Evidence), err
}

func (s *sharedSearcher) remember(domain string, ev classifier.Evidence) {
	s.mu.Lock()
	s.seen[domain] = ev
	s.mu.Unlock()
}

// readJSON reads a cache file. A missing or unreadable file is a miss.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes a cache file atomically, so a crash or a concurrent
// reader never sees half a file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}
