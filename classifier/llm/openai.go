// Package llm is the OpenAI-compatible model client of the classifier
// (OpenAI, vLLM, Ollama, LM Studio…), built on openai-go, and the
// process-wide bounds on model calls.
package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier"
)

// Response formats, strictest first. "auto" starts with json_schema and
// steps down, per model, when a server rejects one.
const (
	FormatAuto       = "auto"
	FormatJSONSchema = "json_schema"
	FormatJSONObject = "json_object"
	FormatNone       = "none"
)

// DefaultTimeout bounds one model call: small models answer in 1–3 s,
// reasoning models in tens of seconds; beyond 60 s the call is given up
// and retried. A reviewed setting: change it in a reviewed commit, or per
// deployment through the environment.
const DefaultTimeout = 60 * time.Second

// Config configures a Client.
type Config struct {
	// BaseURL of the API including /v1; "" is OpenAI's.
	BaseURL string
	APIKey  string
	// Timeout bounds one request; 0 is DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is the SDK's own retries per call. It is 0 by default:
	// River owns retries (with backoff, attempts and a FAILED end), and a
	// 429 must come back to the worker so the job is snoozed, not slept in.
	MaxRetries int
	// ResponseFormat is auto, json_schema, json_object or none.
	ResponseFormat string
	// DefaultRetryAfter is used for a 429 without a Retry-After header.
	DefaultRetryAfter time.Duration
	HTTPClient        *http.Client
	// Conns is how many calls may be in flight at once (the process's
	// model slots): without HTTPClient, that many idle connections are kept
	// to the provider, so that a call does not dial (and shake TLS hands)
	// again when more than Go's default of two end together. 0: two.
	Conns int
	// Observer, when set, is told about every request sent.
	Observer Observer
	// MaxCompletionTokens is sent as max_completion_tokens; 0 is
	// DefaultMaxCompletionTokens.
	MaxCompletionTokens int
	// Feedback, when set, is told what each response said of the
	// account's rate limits.
	Feedback Feedback
}

// DefaultMaxCompletionTokens bounds one answer: the verdict is about 60
// tokens, and a reasoning model's thinking counts too, so 2048 leaves it
// room while a page that talks the model into writing at length costs at
// most that much.
const DefaultMaxCompletionTokens = 2048

// Observer is told about every model request: its status (the HTTP status
// code, or "error" when no response came), how long it took, and the tokens
// the response reported.
type Observer interface {
	ObserveLLMRequest(status string, d time.Duration, promptTokens, completionTokens int)
}

// Client is an OpenAI-compatible chat completions client.
type Client struct {
	sdk     openai.Client
	cfg     Config
	formats sync.Map // model → the format that model's server accepts
}

// New returns a client. It reads no environment variables: everything
// comes from cfg.
func New(cfg Config) (*Client, error) {
	switch cfg.ResponseFormat {
	case "":
		cfg.ResponseFormat = FormatAuto
	case FormatAuto, FormatJSONSchema, FormatJSONObject, FormatNone:
	default:
		return nil, fmt.Errorf("unknown LLM response format %q (want auto, json_schema, json_object or none)", cfg.ResponseFormat)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.DefaultRetryAfter <= 0 {
		cfg.DefaultRetryAfter = 10 * time.Second
	}
	opts := []option.RequestOption{
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(max(cfg.MaxRetries, 0)),
		option.WithRequestTimeout(cfg.Timeout),
		// Drop what openai.NewClient reads from the environment on its own
		// (organization, project, custom headers): config comes from us.
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	} else {
		opts = append(opts, option.WithBaseURL("https://api.openai.com/v1/"))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	} else if cfg.Conns > 0 {
		opts = append(opts, option.WithHTTPClient(&http.Client{Transport: KeepConns(cfg.Conns)}))
	}
	return &Client{sdk: openai.NewClient(opts...), cfg: cfg}, nil
}

// Complete sends one chat completion asking for a JSON object.
//
// Errors: a *RateLimitError (429) carries the provider's Retry-After; a
// *RejectedError (a 4xx other than 408, 409 and 429, once every response
// format was tried) is permanent; anything else (5xx, timeouts, connection
// errors) is transient.
func (c *Client) Complete(ctx context.Context, req classifier.CompletionRequest, _ classifier.CallOptions) (classifier.CompletionResponse, error) {
	// A client span in OpenTelemetry's GenAI conventions: the model asked,
	// the model that answered, the tokens; never the prompt or the key.
	ctx, span := tracer().Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "openai"), attribute.String("gen_ai.request.model", req.Model)))
	defer span.End()
	resp, err := c.complete(ctx, req)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int("gen_ai.usage.input_tokens", resp.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", resp.CompletionTokens))
	return resp, nil
}

// tracer makes the model calls' spans (a no-op until tracing is set up).
// It asks the global provider each time, so that the one installed last
// serves (in production there is one; tests install their own).
func tracer() trace.Tracer { return otel.Tracer("github.com/domainclass/domainclass/classifier/llm") }

func (c *Client) complete(ctx context.Context, req classifier.CompletionRequest) (classifier.CompletionResponse, error) {
	format := c.formatFor(req.Model)
	for {
		start := time.Now()
		var httpResp *http.Response
		resp, err := c.sdk.Chat.Completions.New(ctx, c.params(req, format), option.WithResponseInto(&httpResp))
		latency := time.Since(start)
		if err == nil {
			c.observe("200", latency, int(resp.Usage.PromptTokens), int(resp.Usage.CompletionTokens))
			if httpResp != nil {
				c.tell(readRateLimits(httpResp.Header))
			}
			return toResponse(resp, latency)
		}

		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			c.observe("error", latency, 0, 0)
			return classifier.CompletionResponse{}, fmt.Errorf("%w: %w", errUnreachable, err)
		}
		c.observe(strconv.Itoa(apiErr.StatusCode), latency, 0, 0)
		limits := RateLimits{RemainingRequests: -1, RemainingTokens: -1}
		if apiErr.Response != nil {
			limits = readRateLimits(apiErr.Response.Header)
		}
		if apiErr.StatusCode == http.StatusTooManyRequests && apiErr.Code != "insufficient_quota" {
			limits.Throttled, limits.RetryAfter = true, c.retryAfter(apiErr.Response, apiErr.Type, limits)
		}
		c.tell(limits)
		switch status := apiErr.StatusCode; {
		case limits.Throttled:
			return classifier.CompletionResponse{}, &RateLimitError{After: limits.RetryAfter, Err: apiErr}
		case status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
			return classifier.CompletionResponse{}, fmt.Errorf("LLM request failed: %w", apiErr)
		case (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity) && next(format) != "" && c.cfg.ResponseFormat == FormatAuto:
			// Servers that do not know json_schema (or JSON mode at all)
			// answer 400; remember what works for this model.
			format = next(format)
			c.formats.Store(req.Model, format)
			continue
		default:
			return classifier.CompletionResponse{}, &RejectedError{Status: status, Code: apiErr.Code, Message: apiErr.Message}
		}
	}
}

func (c *Client) observe(status string, d time.Duration, promptTokens, completionTokens int) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.ObserveLLMRequest(status, d, promptTokens, completionTokens)
	}
}

func (c *Client) formatFor(model string) string {
	if c.cfg.ResponseFormat != FormatAuto {
		return c.cfg.ResponseFormat
	}
	if f, ok := c.formats.Load(model); ok {
		return f.(string)
	}
	return FormatJSONSchema
}

func next(format string) string {
	switch format {
	case FormatJSONSchema:
		return FormatJSONObject
	case FormatJSONObject:
		return FormatNone
	}
	return ""
}

func (c *Client) params(req classifier.CompletionRequest, format string) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model: req.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(req.System),
			openai.UserMessage(req.User),
		},
		MaxCompletionTokens: openai.Int(int64(cmp.Or(c.cfg.MaxCompletionTokens, DefaultMaxCompletionTokens))),
	}
	switch format {
	case FormatJSONSchema:
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   req.SchemaName,
					Schema: req.Schema,
					Strict: openai.Bool(true),
				},
			},
		}
	case FormatJSONObject:
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONObject: &shared.ResponseFormatJSONObjectParam{},
		}
	}
	return p
}

func toResponse(resp *openai.ChatCompletion, latency time.Duration) (classifier.CompletionResponse, error) {
	if len(resp.Choices) == 0 {
		return classifier.CompletionResponse{}, &RejectedError{Status: http.StatusOK, Message: "the response has no choices"}
	}
	ch := resp.Choices[0]
	return classifier.CompletionResponse{
		Content:          ch.Message.Content,
		Refusal:          ch.Message.Refusal,
		FinishReason:     string(ch.FinishReason),
		Model:            resp.Model,
		PromptTokens:     int(resp.Usage.PromptTokens),
		CompletionTokens: int(resp.Usage.CompletionTokens),
		Latency:          latency,
	}, nil
}

// retryAfter is how long a 429 of kind asks to wait (throttleWait).
func (c *Client) retryAfter(resp *http.Response, kind string, limits RateLimits) time.Duration {
	if resp == nil {
		return c.cfg.DefaultRetryAfter
	}
	return throttleWait(resp.Header, kind, limits, c.cfg.DefaultRetryAfter)
}

// tell passes what a response said of the rate limits to the feedback.
func (c *Client) tell(r RateLimits) {
	if c.cfg.Feedback != nil && r.Stated() {
		c.cfg.Feedback.ProviderSaid(r)
	}
}

// RateLimitError is a 429 from the provider: not a failure of the domain.
type RateLimitError struct {
	After time.Duration
	Err   error
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("LLM provider throttled (retry after %s): %v", e.After, e.Err)
}
func (e *RateLimitError) Unwrap() error { return e.Err }

// RetryAfter is how long the provider asked us to wait.
func (e *RateLimitError) RetryAfter() time.Duration { return e.After }

// RejectedError is a request the provider will not serve as sent (bad
// request, unknown model, bad key): asking again does not help.
type RejectedError struct {
	Status  int
	Code    string
	Message string
}

func (e *RejectedError) Error() string {
	msg := fmt.Sprintf("LLM provider rejected the request: %d %s", e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	return msg
}

// Permanent reports that the error does not go away by retrying.
func (e *RejectedError) Permanent() bool { return true }

// Trouble words a model call's transient failure for the caller whose
// work waits on it: what failed, without the provider's address or body.
// It returns "" for an error that is not the provider's.
func Trouble(err error) string {
	var (
		apiErr    *openai.Error
		throttled *RateLimitError
	)
	switch {
	case errors.As(err, &throttled):
		return "the model provider asked to slow down (429)"
	case errors.As(err, &apiErr):
		return fmt.Sprintf("the model provider answered %d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
	case errors.Is(err, errUnreachable):
		return "the model provider could not be reached"
	}
	return ""
}

// errUnreachable wraps a model request that got no answer from the
// provider (refused, reset, timed out).
var errUnreachable = errors.New("LLM request failed")

// KeepConns is Go's default transport keeping n idle connections to each
// host (at least two, its default): what a client with n requests in
// flight at once needs so that each does not dial a connection of its own
// once the others end (measured: with two kept and 64 calls in flight, a
// third of them waited on a dial).
func KeepConns(n int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(n, 2)
	t.MaxIdleConns = max(t.MaxIdleConns, 2*n)
	return t
}
