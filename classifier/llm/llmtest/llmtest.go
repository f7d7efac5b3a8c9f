// Package llmtest is an OpenAI-compatible chat completions server on
// loopback for tests: it answers in the wire format of the real API,
// including its failures (429 with Retry-After, 5xx, 400 for an unsupported
// response_format, garbage, stalls), and counts calls per domain.
package llmtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is what the server was asked.
type Request struct {
	Model          string
	System         string
	User           string
	Domain         string // from the prompt's "Domain: …" line
	ResponseFormat string // json_schema, json_object or "" (none)
	// MaxCompletionTokens is the request's max_completion_tokens, 0 when unset.
	MaxCompletionTokens int
	Call                int // 1 for the first call about this domain
	// Batch is the batch a request came in ("" for a call).
	Batch string
}

// Reply is what the server answers. A zero Status is 200.
type Reply struct {
	Status int
	// Content is the assistant message for a 200.
	Content string
	// Raw replaces the whole body (for garbage responses).
	Raw string
	// Header is added to the response (Retry-After…).
	Header map[string]string
	// Wait blocks the reply until the channel is closed or the request is
	// cancelled; Delay sleeps before replying (simulated latency).
	Wait  <-chan struct{}
	Delay time.Duration
	// ErrorCode is the OpenAI error code for non-200 replies.
	ErrorCode string
	// PromptTokens and CompletionTokens are reported in usage.
	PromptTokens, CompletionTokens int

	// errorType and message replace an error body's type and message (a
	// rate limit's).
	errorType, message string
}

// Answer is a well-formed verdict of the cpg classifier.
func Answer(isCPG bool, confidence int, reasoning string) Reply {
	return AnswerAs("is_cpg", isCPG, confidence, reasoning)
}

// AnswerAs is a well-formed verdict of the classifier whose answer field
// is field.
func AnswerAs(field string, answer bool, confidence int, reasoning string) Reply {
	b, _ := json.Marshal(map[string]any{field: answer, "confidence": confidence, "reasoning": reasoning})
	return Reply{Content: string(b), PromptTokens: 120, CompletionTokens: 25}
}

// Steady answers every request with the same verdict after a fixed latency:
// a model of known speed, for benchmarks and drills.
func Steady(isCPG bool, confidence int, reasoning string, latency time.Duration) func(Request) Reply {
	return func(Request) Reply {
		a := Answer(isCPG, confidence, reasoning)
		a.Delay = latency
		return a
	}
}

// Status is an API error reply.
func Status(status int, header map[string]string) Reply {
	return Reply{Status: status, Header: header}
}

// Server is the fake provider.
type Server struct {
	*httptest.Server
	// Handle decides every reply. It may be replaced before requests start.
	Handle func(Request) Reply

	mu       sync.Mutex
	calls    map[string]int
	total    int
	inFlight int
	maxIn    int
	starts   []time.Time
	requests []Request

	// Batch decides how the Batch API's batches end (batch.go).
	Batch   BatchConfig
	files   map[string][]byte
	batches []*batch

	// The account's limits (account.go), and what they did.
	account         Account
	requestsBucket  *bucket
	tokensBucket    *bucket
	throttled       int
	answered        map[string]int
	answeredAt      []time.Time
	answeredTokens  []int
	answeredDomains []string
}

var domainLine = regexp.MustCompile(`(?m)^Domain: (\S+)`)

// New starts a server that answers with handle; it stops when the test ends.
func New(tb testing.TB, handle func(Request) Reply) *Server {
	s := &Server{Handle: handle, calls: map[string]int{}, files: map[string][]byte{}, answered: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// BaseURL is the value for OPENAI_BASE_URL.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Calls returns how many completions were asked about domain.
func (s *Server) Calls(domain string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[domain]
}

// Total returns the number of completion requests received.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// InFlight returns how many requests are being answered now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// MaxInFlight returns the most requests that were in flight at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
}

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Starts returns the arrival time of every request.
func (s *Server) Starts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...)
}

// Domains returns every domain asked about at least once.
func (s *Server) Domains() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/files") || strings.HasPrefix(r.URL.Path, "/v1/batches"):
		s.batchAPI(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found", "unknown route "+r.URL.Path)
	}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var cr chatRequest
	if err := json.NewDecoder(r.Body).Decode(&cr); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", "request body is not JSON")
		return
	}
	req, handle := s.record(cr, "")
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	reply := s.limit(w.Header(), req, handle(req))
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Wait != nil {
		select {
		case <-reply.Wait:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	switch {
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(max(reply.Status, http.StatusOK))
		_, _ = w.Write([]byte(reply.Raw))
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeError(w, reply.Status, reply.ErrorCode, cmp.Or(reply.message, http.StatusText(reply.Status)), reply.errorType)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(completion(req, reply))
	}
}

// limit applies the account's limits to a request the handler answers
// with reply: a 200 the buckets cannot take becomes a 429, and is not
// counted as answered.
func (s *Server) limit(h http.Header, req Request, reply Reply) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := reply.Status == 0 || reply.Status == http.StatusOK
	if ok && (s.requestsBucket != nil || s.tokensBucket != nil) {
		if refused := s.admit(h, req.Model, reply.PromptTokens+reply.CompletionTokens); refused != nil {
			return *refused
		}
	}
	if ok && reply.Raw == "" {
		s.answered[req.Domain]++
		s.answeredAt = append(s.answeredAt, time.Now())
		s.answeredTokens = append(s.answeredTokens, reply.PromptTokens+reply.CompletionTokens)
		s.answeredDomains = append(s.answeredDomains, req.Domain)
	}
	return reply
}

// record counts one completion request (in flight until the caller says
// otherwise) and returns it with the handler to answer it.
func (s *Server) record(cr chatRequest, batch string) (Request, func(Request) Reply) {
	req := Request{Model: cr.Model, MaxCompletionTokens: cr.MaxCompletionTokens, Batch: batch}
	for _, m := range cr.Messages {
		switch m.Role {
		case "system":
			req.System = m.Content
		case "user":
			req.User = m.Content
		}
	}
	if cr.ResponseFormat != nil {
		req.ResponseFormat = cr.ResponseFormat.Type
	}
	if m := domainLine.FindStringSubmatch(req.User); m != nil {
		req.Domain = m[1]
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[req.Domain]++
	s.total++
	req.Call = s.calls[req.Domain]
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	s.starts = append(s.starts, time.Now())
	s.requests = append(s.requests, req)
	return req, s.Handle
}

// completion is a chat.completion object answering req with reply.
func completion(req Request, reply Reply) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", req.Call), "object": "chat.completion", "created": time.Now().Unix(),
		"model": req.Model,
		"choices": []map[string]any{{
			"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": reply.Content, "refusal": nil},
		}},
		"usage": map[string]any{
			"prompt_tokens": reply.PromptTokens, "completion_tokens": reply.CompletionTokens,
			"total_tokens": reply.PromptTokens + reply.CompletionTokens,
		},
	}
}

// writeError writes an error in OpenAI's shape; typ is its type
// (invalid_request_error when "").
func writeError(w http.ResponseWriter, status int, code, msg string, typ ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var c any
	if code != "" {
		c = code
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": cmp.Or(append(typ, "invalid_request_error")...), "param": nil, "code": c},
	})
}
