package main

import (
	"context"
	"log/slog"
)

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

// libraryLogger is the logger handed to River: the same handler, from Warn
// up unless LOG_LEVEL=debug.
func libraryLogger(logger *slog.Logger, level string) *slog.Logger {
	if level == "debug" {
		return logger
	}
	return slog.New(minLevel{logger.Handler(), slog.LevelWarn})
}
