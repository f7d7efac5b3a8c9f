package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/domainclass/domainclass/classifier"
)

// The Batch API (OpenAI's /v1/files and /v1/batches; Anthropic's and
// Together's work the same way): a JSONL file of chat completions, run
// within 24 hours at about half the price.

// BatchKey is the metadata key under which a batch carries the id its
// submitter gave it, so that a submitter that died after creating the
// batch finds it again (BatchFind) instead of paying for it twice.
const BatchKey = "domainclass_batch"

// BatchStatus is where a provider batch stands.
type BatchStatus struct {
	ID string
	// Status is the provider's: validating, in_progress, finalizing,
	// completed, failed, expired, cancelling or cancelled.
	Status       string
	OutputFileID string
	ErrorFileID  string
	// Error is the provider's reason for a batch that failed as a whole.
	Error                    string
	Total, Completed, Failed int
}

// Running reports whether the batch has not ended yet.
func (b BatchStatus) Running() bool {
	switch b.Status {
	case "completed", "failed", "expired", "cancelled":
		return false
	}
	return true
}

// BatchResult is one line of a batch's output or error file: the request's
// custom_id and the model's response, or why there is none (Err).
type BatchResult struct {
	CustomID string
	Response classifier.CompletionResponse
	Err      error
}

// BatchLine is one line of a batch input file: the chat completion that
// Complete would send for req, under customID.
func (c *Client) BatchLine(customID string, req classifier.CompletionRequest) ([]byte, error) {
	return json.Marshal(struct {
		CustomID string                         `json:"custom_id"`
		Method   string                         `json:"method"`
		URL      string                         `json:"url"`
		Body     openai.ChatCompletionNewParams `json:"body"`
	}{customID, http.MethodPost, "/v1/chat/completions", c.params(req, c.formatFor(req.Model))})
}

// BatchSubmit uploads input (JSONL lines made by BatchLine) and starts a
// batch on it with a 24-hour window, carrying key in its metadata.
func (c *Client) BatchSubmit(ctx context.Context, input io.Reader, key string) (BatchStatus, error) {
	f, err := c.sdk.Files.New(ctx, openai.FileNewParams{
		File: openai.File(input, "batch.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		return BatchStatus{}, providerError("uploading the batch file", err)
	}
	b, err := c.sdk.Batches.New(ctx, openai.BatchNewParams{
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Endpoint:         openai.BatchNewParamsEndpointV1ChatCompletions,
		InputFileID:      f.ID,
		Metadata:         shared.Metadata{BatchKey: key},
	})
	if err != nil {
		return BatchStatus{}, providerError("creating the batch", err)
	}
	return toBatchStatus(b), nil
}

// BatchFind returns the batch carrying key among the provider's latest
// 100, and whether there is one.
func (c *Client) BatchFind(ctx context.Context, key string) (BatchStatus, bool, error) {
	page, err := c.sdk.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(100)})
	if err != nil {
		return BatchStatus{}, false, providerError("listing batches", err)
	}
	for _, b := range page.Data {
		if b.Metadata[BatchKey] == key {
			return toBatchStatus(&b), true, nil
		}
	}
	return BatchStatus{}, false, nil
}

// BatchGet reads a batch's status.
func (c *Client) BatchGet(ctx context.Context, id string) (BatchStatus, error) {
	b, err := c.sdk.Batches.Get(ctx, id)
	if err != nil {
		return BatchStatus{}, providerError("reading the batch", err)
	}
	return toBatchStatus(b), nil
}

// BatchCancel asks the provider to stop a batch (it goes through
// cancelling to cancelled, with the answers made so far in its output).
func (c *Client) BatchCancel(ctx context.Context, id string) (BatchStatus, error) {
	b, err := c.sdk.Batches.Cancel(ctx, id)
	if err != nil {
		return BatchStatus{}, providerError("cancelling the batch", err)
	}
	return toBatchStatus(b), nil
}

// BatchResults reads an ended batch's output file, then its error file,
// and calls fn with each line. A line that cannot be read is a result
// with Err and the custom_id when it has one.
func (c *Client) BatchResults(ctx context.Context, b BatchStatus, fn func(BatchResult) error) error {
	for _, id := range []string{b.OutputFileID, b.ErrorFileID} {
		if id == "" {
			continue
		}
		if err := c.fileLines(ctx, id, fn); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) fileLines(ctx context.Context, fileID string, fn func(BatchResult) error) error {
	resp, err := c.sdk.Files.Content(ctx, fileID)
	if err != nil {
		return providerError("downloading a batch file", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := fn(batchResult(sc.Bytes())); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("error reading batch file %s: %w", fileID, err)
	}
	return nil
}

// batchResult reads one output or error line:
//
//	{"custom_id": "...", "response": {"status_code": 200, "body": {chat completion}}, "error": null}
//	{"custom_id": "...", "response": null, "error": {"code": "batch_expired", "message": "..."}}
func batchResult(line []byte) BatchResult {
	var l struct {
		CustomID string `json:"custom_id"`
		Response *struct {
			StatusCode int             `json:"status_code"`
			Body       json.RawMessage `json:"body"`
		} `json:"response"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return BatchResult{Err: fmt.Errorf("unreadable batch line: %w", err)}
	}
	r := BatchResult{CustomID: l.CustomID}
	switch {
	case l.Error != nil:
		r.Err = fmt.Errorf("batch request failed: %s: %s", l.Error.Code, classifier.Truncate(l.Error.Message, 200))
	case l.Response == nil:
		r.Err = errors.New("batch line has neither response nor error")
	case l.Response.StatusCode != http.StatusOK:
		r.Err = fmt.Errorf("batch request failed: status %s", strconv.Itoa(l.Response.StatusCode))
	default:
		var cc openai.ChatCompletion
		if err := json.Unmarshal(l.Response.Body, &cc); err != nil {
			r.Err = fmt.Errorf("unreadable chat completion in batch line: %w", err)
			break
		}
		r.Response, r.Err = toResponse(&cc, 0)
	}
	return r
}

func toBatchStatus(b *openai.Batch) BatchStatus {
	s := BatchStatus{ID: b.ID, Status: string(b.Status), OutputFileID: b.OutputFileID, ErrorFileID: b.ErrorFileID,
		Total: int(b.RequestCounts.Total), Completed: int(b.RequestCounts.Completed), Failed: int(b.RequestCounts.Failed)}
	if len(b.Errors.Data) > 0 {
		e := b.Errors.Data[0]
		s.Error = classifier.Truncate(e.Message, 300)
		if e.Code != "" {
			s.Error = e.Code + ": " + s.Error
		}
	}
	return s
}

// providerError sorts a files or batches API error as Complete does: 429
// throttling, other 4xx permanent, the rest transient.
func providerError(what string, err error) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("error %s: %w", what, err)
	}
	switch status := apiErr.StatusCode; {
	case status == http.StatusTooManyRequests && apiErr.Code != "insufficient_quota":
		return &RateLimitError{After: DefaultBatchRetryAfter, Err: apiErr}
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("error %s: %w", what, apiErr)
	default:
		return &RejectedError{Status: status, Code: apiErr.Code, Message: apiErr.Message}
	}
}

// DefaultBatchRetryAfter is the wait after a 429 from the files or batches
// API, which says nothing more useful than a polling interval.
const DefaultBatchRetryAfter = 30 * time.Second
