package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// DefaultDatabaseURL is the private cluster that `go tool task up` starts.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:54329/domainclass?sslmode=disable"

// Config is every setting of the binary, read once from the environment
// (DESIGN §7). Secrets are only ever passed on, never printed.
type Config struct {
	DatabaseURL    string `env:"DATABASE_URL"`
	DatabaseSchema string `env:"DATABASE_SCHEMA"` // holds all tables; "" = search_path
	DBMaxConns     int32  `env:"DB_MAX_CONNS"`

	HTTPAddr   string `env:"HTTP_ADDR"`
	WorkerAddr string `env:"WORKER_ADDR"`

	OpenAIAPIKey      string `env:"OPENAI_API_KEY"`
	OpenAIBaseURL     string `env:"OPENAI_BASE_URL"`
	OpenAIModel       string `env:"OPENAI_MODEL"`
	LLMResponseFormat string `env:"LLM_RESPONSE_FORMAT"`

	SearchProvider     string `env:"SEARCH_PROVIDER"`
	SearchAllowPrivate bool   `env:"SEARCH_ALLOW_PRIVATE"`
	BraveAPIKey        string `env:"BRAVE_API_KEY"`
	BraveBaseURL       string `env:"BRAVE_BASE_URL"`

	WebhookSecret        string `env:"WEBHOOK_SECRET"`
	CallbackAllowPrivate bool   `env:"CALLBACK_ALLOW_PRIVATE"`

	Auth            string `env:"AUTH"`
	RiverUIUser     string `env:"RIVERUI_USER"`
	RiverUIPassword string `env:"RIVERUI_PASSWORD"`

	LogFormat string `env:"LOG_FORMAT"`
	LogLevel  string `env:"LOG_LEVEL"`

	Settings jobs.Settings
}

// DefaultConfig returns the defaults of DESIGN §7 and the reviewed settings.
func DefaultConfig() Config {
	return Config{
		DatabaseURL:    DefaultDatabaseURL,
		HTTPAddr:       "127.0.0.1:8080",
		WorkerAddr:     "127.0.0.1:8081",
		OpenAIModel:    "gpt-5.4-mini",
		SearchProvider: "homepage",
		Auth:           "on",
		LogFormat:      "json",
		LogLevel:       "info",
		Settings:       jobs.DefaultSettings(),
	}
}

// LoadConfig reads the environment over the defaults. It returns one clear
// error for a value that cannot be read.
func LoadConfig(environ []string) (Config, error) {
	cfg := DefaultConfig()
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: envMap(environ)}); err != nil {
		return cfg, configError(err)
	}
	return cfg, cfg.Validate()
}

// configError names the environment variables that could not be read,
// instead of the Go fields behind them.
func configError(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	names := envNames(reflect.TypeFor[Config]())
	var msgs []string
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			msgs = append(msgs, fmt.Sprintf("invalid %s: %v", names[pe.Name], pe.Err))
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return errors.New(strings.Join(msgs, "; "))
}

// envNames maps field names (of nested structs too) to their env tags.
func envNames(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
			for k, v := range envNames(f.Type) {
				out[k] = v
			}
			continue
		}
		out[f.Name] = f.Tag.Get("env")
	}
	return out
}

// Validate checks the values env parsing cannot.
func (c Config) Validate() error {
	switch c.Auth {
	case "on", "off":
	default:
		return fmt.Errorf("AUTH must be on or off, got %q", c.Auth)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return fmt.Errorf("LOG_FORMAT must be json or text, got %q", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if (c.RiverUIUser == "") != (c.RiverUIPassword == "") {
		return errors.New("set both RIVERUI_USER and RIVERUI_PASSWORD, or neither")
	}
	if c.WebhookSecret != "" {
		if _, err := jobs.ParseWebhookSecret(c.WebhookSecret); err != nil {
			return fmt.Errorf("WEBHOOK_SECRET %v (make one with: echo whsec_$(openssl rand -base64 32))", err)
		}
	}
	return c.Settings.Validate()
}

// NewLogger returns the process logger: JSON (or text) on w.
func (c Config) NewLogger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// openDB opens a small pool for a command (migrate, known, jobs, apikey).
func (c Config) openDB(ctx context.Context, command string, maxConns int32) (*db.DB, error) {
	return db.Open(ctx, db.Config{URL: c.DatabaseURL, Schema: c.DatabaseSchema, MaxConns: maxConns,
		ApplicationName: "domainclass-" + command})
}
