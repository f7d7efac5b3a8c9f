package classifier

import (
	"errors"
	"fmt"
	"time"
)

// Error codes shared by every package. httpapi maps them to HTTP statuses in
// one place; the CLI maps them to exit codes.
const (
	ECONFLICT     = "conflict"     // the request collides with one in flight
	EINTERNAL     = "internal"     // a bug or an unexpected failure
	EINVALID      = "invalid"      // the caller sent something we cannot accept
	ENOTFOUND     = "not_found"    // no such thing (or not the caller's)
	EUNAUTHORIZED = "unauthorized" // no, malformed, unknown or revoked credentials
	EUNAVAILABLE  = "unavailable"  // a dependency (Postgres) is down; try again soon
	ETOOMANY      = "too_many"     // a per-caller limit was reached; try again later
)

// Error is the application error: a code for the edge to map, and a message
// that is safe to show to the caller. Errors without a code are internal and
// are shown as "Internal error.".
type Error struct {
	Code    string
	Message string
	// Type is an optional, more specific problem type (a slug such as
	// "invalid-domains") that httpapi turns into the problem+json "type".
	Type string
	// Items lists rejected inputs, when the error is about several of them.
	Items []ItemError
	// RetryAfter, when set, tells the caller when to try again (Retry-After).
	RetryAfter time.Duration
	// Err is the underlying cause, kept for logs and errors.Is; never shown.
	Err error
}

// ItemError says why one input was rejected.
type ItemError struct {
	Input  string `json:"input"`
	Reason string `json:"reason"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EINTERNAL
// for any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of err: the message of its
// *Error, or "Internal error." for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}
