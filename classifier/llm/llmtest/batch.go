package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The Batch API as OpenAI serves it: POST /v1/files (multipart, purpose
// "batch"), GET /v1/files/{id} and /v1/files/{id}/content, POST
// /v1/batches, GET /v1/batches (newest first), GET /v1/batches/{id} and
// POST /v1/batches/{id}/cancel.
//
// A batch moves one state each time it is read: validating, in_progress,
// finalizing, then its end (BatchConfig.End). An input file that is not
// JSONL of POST /v1/chat/completions requests with unique custom_ids
// fails validation, as the real one does. On completion each request is
// answered by Handle, as a chat completion would be (counted in Calls): a
// 200 goes to the output file, another status to the error file.

// BatchConfig decides how batches end.
type BatchConfig struct {
	// End is the state a batch reaches: "completed" (the default),
	// "failed" (as a whole) or "expired".
	End string
	// FailCode and FailMessage are a failed batch's errors.data[0].
	FailCode, FailMessage string
	// ExpireAfter is how many of an expired batch's requests were answered
	// before it expired; the rest are in its error file as batch_expired.
	ExpireAfter int
	// Hold, when set, keeps batches in_progress until it is closed.
	Hold <-chan struct{}
}

type batch struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Endpoint    string            `json:"endpoint"`
	InputFileID string            `json:"input_file_id"`
	Window      string            `json:"completion_window"`
	Status      string            `json:"status"`
	OutputFile  *string           `json:"output_file_id"`
	ErrorFile   *string           `json:"error_file_id"`
	CreatedAt   int64             `json:"created_at"`
	Metadata    map[string]string `json:"metadata"`
	Errors      *batchErrors      `json:"errors"`
	Counts      struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
}

type batchErrors struct {
	Object string       `json:"object"`
	Data   []batchError `json:"data"`
}

type batchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    *int   `json:"line"`
}

type batchLine struct {
	CustomID string      `json:"custom_id"`
	Method   string      `json:"method"`
	URL      string      `json:"url"`
	Body     chatRequest `json:"body"`
}

// Batches returns how many batches were created, and how many requests
// they held in all.
func (s *Server) Batches() (batches, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		requests += b.Counts.Total
	}
	return len(s.batches), requests
}

// BatchStatuses returns every batch's status, oldest first.
func (s *Server) BatchStatuses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batches {
		out = append(out, b.Status)
	}
	return out
}

func (s *Server) batchAPI(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	switch {
	case parts[0] == "files" && len(parts) == 1 && r.Method == http.MethodPost:
		s.fileUpload(w, r)
	case parts[0] == "files" && len(parts) == 3 && parts[2] == "content" && r.Method == http.MethodGet:
		s.mu.Lock()
		b, ok := s.files[parts[1]]
		s.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", "No such File object: "+parts[1])
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	case parts[0] == "batches" && len(parts) == 1 && r.Method == http.MethodPost:
		s.batchCreate(w, r)
	case parts[0] == "batches" && len(parts) == 1 && r.Method == http.MethodGet:
		s.mu.Lock()
		data := make([]*batch, 0, len(s.batches))
		for i := len(s.batches) - 1; i >= 0; i-- {
			data = append(data, s.batches[i])
		}
		body, _ := json.Marshal(map[string]any{"object": "list", "data": data, "has_more": false})
		s.mu.Unlock()
		writeJSON(w, body)
	case parts[0] == "batches" && len(parts) == 2 && r.Method == http.MethodGet:
		s.batchRead(w, parts[1], false)
	case parts[0] == "batches" && len(parts) == 3 && parts[2] == "cancel" && r.Method == http.MethodPost:
		s.batchRead(w, parts[1], true)
	default:
		writeError(w, http.StatusNotFound, "not_found", "unknown route "+r.URL.Path)
	}
}

func (s *Server) fileUpload(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "expected multipart/form-data: "+err.Error())
		return
	}
	if p := r.FormValue("purpose"); p != "batch" {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("purpose %q is not batch", p))
		return
	}
	f, h, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "no file: "+err.Error())
		return
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	s.mu.Lock()
	id := fmt.Sprintf("file-%d", len(s.files)+1)
	s.files[id] = b
	s.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"id": id, "object": "file", "bytes": len(b), "created_at": time.Now().Unix(),
		"filename": h.Filename, "purpose": "batch", "status": "processed"})
	writeJSON(w, body)
}

func (s *Server) batchCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InputFileID string            `json:"input_file_id"`
		Endpoint    string            `json:"endpoint"`
		Window      string            `json:"completion_window"`
		Metadata    map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", "request body is not JSON")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[req.InputFileID]; !ok {
		writeError(w, http.StatusNotFound, "not_found", "No such File object: "+req.InputFileID)
		return
	}
	if req.Endpoint != "/v1/chat/completions" || req.Window != "24h" {
		writeError(w, http.StatusBadRequest, "invalid_request", "endpoint or completion_window not supported")
		return
	}
	b := &batch{ID: fmt.Sprintf("batch_%d", len(s.batches)+1), Object: "batch", Endpoint: req.Endpoint,
		InputFileID: req.InputFileID, Window: req.Window, Status: "validating", CreatedAt: time.Now().Unix(),
		Metadata: req.Metadata}
	s.batches = append(s.batches, b)
	body, _ := json.Marshal(b)
	writeJSON(w, body)
}

// batchRead answers a GET (or a cancel) of batch id, moving it one state.
func (s *Server) batchRead(w http.ResponseWriter, id string, cancel bool) {
	s.mu.Lock()
	var b *batch
	for _, x := range s.batches {
		if x.ID == id {
			b = x
		}
	}
	if b == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "No such Batch object: "+id)
		return
	}
	var lines []batchLine
	switch {
	case cancel && (b.Status == "validating" || b.Status == "in_progress" || b.Status == "finalizing"):
		b.Status = "cancelling"
	case cancel:
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request", "Cannot cancel a batch with status "+b.Status)
		return
	case b.Status == "cancelling":
		b.Status = "cancelled"
	case b.Status == "validating":
		var bad *batchError
		lines, bad = parseBatchInput(s.files[b.InputFileID])
		if bad != nil {
			b.Status, b.Errors = "failed", &batchErrors{Object: "list", Data: []batchError{*bad}}
		} else {
			b.Status, b.Counts.Total = "in_progress", len(lines)
		}
	case b.Status == "in_progress" && !held(s.Batch.Hold):
		b.Status = "finalizing"
	case b.Status == "finalizing":
		lines, _ = parseBatchInput(s.files[b.InputFileID])
		end := s.Batch.End
		if end == "" {
			end = "completed"
		}
		if end == "failed" {
			b.Status = "failed"
			b.Errors = &batchErrors{Object: "list", Data: []batchError{{Code: s.Batch.FailCode, Message: s.Batch.FailMessage}}}
			break
		}
		s.mu.Unlock()
		out, errs, ok, failed := s.runBatch(b.ID, lines, end == "expired")
		s.mu.Lock()
		b.Status, b.Counts.Completed, b.Counts.Failed = end, ok, failed
		if len(out) > 0 {
			name := fmt.Sprintf("file-%d", len(s.files)+1)
			s.files[name], b.OutputFile = out, &name
		}
		if len(errs) > 0 {
			name := fmt.Sprintf("file-%d", len(s.files)+1)
			s.files[name], b.ErrorFile = errs, &name
		}
	}
	body, _ := json.Marshal(b)
	s.mu.Unlock()
	writeJSON(w, body)
}

func held(hold <-chan struct{}) bool {
	if hold == nil {
		return false
	}
	select {
	case <-hold:
		return false
	default:
		return true
	}
}

// runBatch answers a batch's requests through Handle: output and error
// files, and how many succeeded and failed. An expired batch answers the
// first ExpireAfter.
func (s *Server) runBatch(id string, lines []batchLine, expired bool) (out, errs []byte, ok, failed int) {
	var ob, eb bytes.Buffer
	for i, l := range lines {
		if expired && i >= s.Batch.ExpireAfter {
			failed++
			writeLine(&eb, map[string]any{"id": fmt.Sprintf("batch_req_%d", i), "custom_id": l.CustomID, "response": nil,
				"error": map[string]any{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})
			continue
		}
		req, handle := s.record(l.Body, id)
		reply := handle(req)
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
		switch {
		case reply.Status != 0 && reply.Status != http.StatusOK:
			failed++
			writeLine(&eb, map[string]any{"id": fmt.Sprintf("batch_req_%d", i), "custom_id": l.CustomID,
				"response": map[string]any{"status_code": reply.Status, "request_id": fmt.Sprintf("req_%d", i),
					"body": map[string]any{"error": map[string]any{"message": http.StatusText(reply.Status), "type": "invalid_request_error", "code": reply.ErrorCode}}},
				"error": nil})
		default:
			ok++
			var body any = completion(req, reply)
			if reply.Raw != "" {
				body = json.RawMessage(reply.Raw)
				if !json.Valid([]byte(reply.Raw)) {
					body = reply.Raw
				}
			}
			writeLine(&ob, map[string]any{"id": fmt.Sprintf("batch_req_%d", i), "custom_id": l.CustomID,
				"response": map[string]any{"status_code": 200, "request_id": fmt.Sprintf("req_%d", i), "body": body},
				"error":    nil})
		}
	}
	return ob.Bytes(), eb.Bytes(), ok, failed
}

func writeLine(w *bytes.Buffer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.WriteByte('\n')
}

// parseBatchInput reads an input file as the provider validates it.
func parseBatchInput(b []byte) ([]batchLine, *batchError) {
	var lines []batchLine
	seen := map[string]bool{}
	for i, raw := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		n := i + 1
		var l batchLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, &batchError{Code: "invalid_json_line", Message: "This line is not parseable as valid JSON.", Line: &n}
		}
		switch {
		case l.CustomID == "":
			return nil, &batchError{Code: "missing_required_parameter", Message: "custom_id is required", Line: &n}
		case seen[l.CustomID]:
			return nil, &batchError{Code: "duplicate_custom_id", Message: "The custom_id for this request is a duplicate of another request.", Line: &n}
		case l.Method != http.MethodPost || l.URL != "/v1/chat/completions":
			return nil, &batchError{Code: "invalid_url", Message: "The URL provided for this request does not match the batch endpoint.", Line: &n}
		case l.Body.Model == "":
			return nil, &batchError{Code: "missing_required_parameter", Message: "model is required", Line: &n}
		}
		seen[l.CustomID] = true
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, &batchError{Code: "empty_file", Message: "The batch input file is empty."}
	}
	return lines, nil
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
