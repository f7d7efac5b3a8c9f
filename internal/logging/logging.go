// Package logging is the process's logs: the logger LOG_FORMAT and
// LOG_LEVEL ask for, the quieter one handed to libraries (River), and a
// database outage told in a few lines, not thousands (Outage). The binary
// wires it; no package below cmd logs through anything but the
// *slog.Logger it is given.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// New returns the process logger: JSON (format "json") or text on w, from
// level up. A format or level Check refuses gives JSON from info.
func New(w io.Writer, format, level string) *slog.Logger {
	l, _ := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Check returns an error, naming LOG_FORMAT or LOG_LEVEL, for a format
// other than json or text, or a level slog does not know.
func Check(format, level string) error {
	switch format {
	case "json", "text":
	default:
		return fmt.Errorf("LOG_FORMAT must be json or text, got %q", format)
	}
	_, err := ParseLevel(level)
	return err
}

// ParseLevel reads LOG_LEVEL: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// minLevel passes records at or above min to the wrapped handler. River's
// own lines go through the process handler this way: its routine Info lines
// (producer counts every few seconds) would drown ours.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// Library is the logger handed to River: the same handler, from Warn
// up unless level is "debug", and within an outage counted, not printed
// (outageHandler).
func Library(logger *slog.Logger, level string) *slog.Logger {
	h := logger.Handler()
	if o, ok := h.(outageHandler); ok {
		h = o.forLibrary() // its lines during an outage are the outage's
	}
	if level == "debug" {
		return slog.New(h)
	}
	return slog.New(minLevel{h, slog.LevelWarn})
}
