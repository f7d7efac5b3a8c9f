package classifier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Verdict is what a model said about one domain.
type Verdict struct {
	Answer     bool
	Confidence int
	Reasoning  string
}

// ParseError says why a model's output could not be read as a verdict. The
// domain is then FAILED with this reason; it is never guessed.
type ParseError struct {
	Reason string
}

func (e *ParseError) Error() string { return "unreadable model output: " + e.Reason }

// Permanent reports that asking again with the same input is not the fix.
func (e *ParseError) Permanent() bool { return true }

const maxReasoningLength = 500

var (
	thinkBlock = regexp.MustCompile(`(?is)<think>.*?</think>`)
	thinkOpen  = regexp.MustCompile(`(?i)<think>`)
	thinkClose = regexp.MustCompile(`(?i)</think>`)
)

// ParseVerdict reads a verdict out of a model's raw output. answerField is
// the classifier's answer key ("is_cpg"); keys match case-insensitively.
//
// Valid JSON is read as is, so a "<think>" inside a string is left alone.
// Otherwise <think>…</think> blocks, a lone leading "</think>" (its opening
// tag came from the chat template) and an unclosed "<think>" tag are removed,
// and the first JSON object that holds the answer key is read, ignoring
// code fences and any text around it. The answer accepts true/false,
// "yes"/"no" and 1/0, as JSON values or strings, in any case; confidence an
// integer 1–5 or its string or float form; reasoning a non-empty string,
// folded to one line. Anything else is a *ParseError.
func ParseVerdict(output, answerField string) (Verdict, error) {
	fields, err := findObject(output, answerField)
	if err != nil {
		return Verdict{}, err
	}
	var v Verdict
	if v.Answer, err = parseAnswer(fields[answerField], answerField); err != nil {
		return Verdict{}, err
	}
	if v.Confidence, err = parseConfidence(fields["confidence"]); err != nil {
		return Verdict{}, err
	}
	if v.Reasoning, err = parseReasoning(fields["reasoning"]); err != nil {
		return Verdict{}, err
	}
	return v, nil
}

// findObject returns the fields (keys lower-cased) of the first JSON object in
// output that has answerField.
func findObject(output, answerField string) (map[string]json.RawMessage, error) {
	text := strings.TrimSpace(output)
	if text == "" {
		return nil, &ParseError{Reason: "empty output"}
	}
	if fields, ok := decodeObject([]byte(text), answerField, true); ok {
		return fields, nil
	}

	text = thinkBlock.ReplaceAllString(text, " ")
	if loc := thinkClose.FindAllStringIndex(text, -1); len(loc) > 0 {
		text = text[loc[len(loc)-1][1]:] // everything before a lone </think> was thinking
	}
	text = thinkOpen.ReplaceAllString(text, " ")

	sawBrace := false
	for i := strings.IndexByte(text, '{'); i >= 0; {
		sawBrace = true
		if fields, ok := decodeObject([]byte(text[i:]), answerField, false); ok {
			return fields, nil
		}
		next := strings.IndexByte(text[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	if sawBrace {
		return nil, &ParseError{Reason: fmt.Sprintf("no complete JSON object with %q (truncated or malformed)", answerField)}
	}
	return nil, &ParseError{Reason: "no JSON object in output"}
}

// decodeObject decodes one JSON object at the start of b. With whole set, b
// must hold nothing else.
func decodeObject(b []byte, answerField string, whole bool) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, false
	}
	if whole && dec.More() {
		return nil, false
	}
	fields := make(map[string]json.RawMessage, len(raw))
	for k, v := range raw {
		key := strings.ToLower(strings.TrimSpace(k))
		if _, dup := fields[key]; !dup {
			fields[key] = v
		}
	}
	if _, ok := fields[strings.ToLower(answerField)]; !ok {
		return nil, false
	}
	if answerField != strings.ToLower(answerField) {
		fields[answerField] = fields[strings.ToLower(answerField)]
	}
	return fields, true
}

func parseAnswer(raw json.RawMessage, answerField string) (bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, &ParseError{Reason: fmt.Sprintf("%s is not readable", answerField)}
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case float64:
		switch x {
		case 1:
			return true, nil
		case 0:
			return false, nil
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes", "1":
			return true, nil
		case "false", "no", "0":
			return false, nil
		}
	}
	return false, &ParseError{Reason: fmt.Sprintf("%s is not a clear yes or no: %s", answerField, Truncate(string(raw), 40))}
}

func parseConfidence(raw json.RawMessage) (int, error) {
	if raw == nil {
		return 0, &ParseError{Reason: "confidence is missing"}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, &ParseError{Reason: "confidence is not readable"}
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, &ParseError{Reason: fmt.Sprintf("confidence is not a number: %s", Truncate(x, 20))}
		}
	default:
		return 0, &ParseError{Reason: fmt.Sprintf("confidence is not a number: %s", Truncate(string(raw), 20))}
	}
	if f != math.Trunc(f) || f < 1 || f > 5 {
		return 0, &ParseError{Reason: fmt.Sprintf("confidence %s is not an integer from 1 to 5", Truncate(string(raw), 20))}
	}
	return int(f), nil
}

func parseReasoning(raw json.RawMessage) (string, error) {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return "", &ParseError{Reason: "reasoning is missing or not a string"}
	}
	if s = FoldLine(s); s == "" {
		return "", &ParseError{Reason: "reasoning is empty"}
	}
	return Truncate(s, maxReasoningLength), nil
}

// FoldLine returns s on one line, for text from outside (a model, a web
// page, an operator's flag) that people are shown: control characters, an
// escape sequence's ESC among them (it would drive the terminal that shows
// the text), and runs of whitespace become one space; the ends are trimmed.
func FoldLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// Truncate cuts s to at most n runes, marking the cut with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
