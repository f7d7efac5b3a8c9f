package main

import (
	"context"
	"fmt"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// startTracing installs an OTLP/HTTP exporter as the global tracer provider
// and W3C trace context as the propagator, when the configuration asks for
// traces (Config.tracing). The exporter takes its endpoint, headers and
// timeout from the standard OTEL_EXPORTER_OTLP_* variables, and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. The returned
// func flushes and stops it.
func startTracing(ctx context.Context, cfg Config, role string) (func(context.Context) error, error) {
	if !cfg.tracing() {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("error starting the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceVersion(Version), semconv.ServiceInstanceID(role)))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// pgxTracer is the Postgres span maker: one span a query, named by its
// first word, without the statement's text, its parameters (they can hold
// callers' inputs and URLs) or a span per pool acquire. The text and the
// acquires tripled what a traced accept exported and cost a quarter of its
// throughput (docs/BENCHMARKS.md, "tracing"); the statement is in the code
// that the span's parent names.
func pgxTracer() pgx.QueryTracer {
	return otelpgx.NewTracer(otelpgx.WithTrimSQLInSpanName(), otelpgx.WithDisableAcquireTracer(),
		otelpgx.WithDisableSQLStatementInAttributes(), otelpgx.WithDisableConnectionDetailsInAttributes())
}

// riverMiddleware traces River: a span for each insert, and one for each
// job's work, linked to the insert's through the job's metadata.
func riverMiddleware() []rivertype.Middleware {
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true,
	})}
}
