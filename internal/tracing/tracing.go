// Package tracing is the process's OpenTelemetry traces: the OTLP
// exporter, and the span makers of Postgres (pgx) and River, shaped so that
// a traced request costs little (docs/BENCHMARKS.md, "tracing"). The HTTP
// server's spans are httpapi's, the model's and webhooks' their clients'.
package tracing

import (
	"context"
	"fmt"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Exported reports whether traces are exported, from the values of
// OTEL_TRACES_EXPORTER (exporter), OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: exporter "otlp", or an OTLP endpoint
// with no exporter named ("none" turns them off).
func Exported(exporter, endpoint, tracesEndpoint string) bool {
	switch exporter {
	case "otlp":
		return true
	case "none":
		return false
	}
	return endpoint != "" || tracesEndpoint != ""
}

// Start installs an OTLP/HTTP exporter as the global tracer provider and
// W3C trace context as the propagator. The exporter takes its endpoint,
// headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables, and
// the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; version and
// instance (the process's role) are added to the resource. The returned
// func flushes and stops it. It returns an error when the exporter cannot
// be built.
func Start(ctx context.Context, version, instance string) (func(context.Context) error, error) {
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("error starting the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceVersion(version), semconv.ServiceInstanceID(instance)))
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// Postgres is the span maker of pgx: one span a statement, named by its
// first word, without the statement's text, its parameters (they can hold
// callers' inputs and URLs), a span per pool acquire, spans for BEGIN,
// COMMIT and ROLLBACK, or one for the statement of a River insert. The
// text and the acquires tripled what a traced accept exported and cost a
// quarter of its throughput; the transaction's own statements were two of
// its nine spans, and the River insert's statement a fourth of the rest,
// timed already by its river.insert_many span, its only child
// (docs/BENCHMARKS.md, "tracing"). The statement is in the code that the
// span's parent names.
func Postgres() pgx.QueryTracer {
	return selectiveTracer{otelpgx.NewTracer(otelpgx.WithTrimSQLInSpanName(), otelpgx.WithDisableAcquireTracer(),
		otelpgx.WithDisableSQLStatementInAttributes(), otelpgx.WithDisableConnectionDetailsInAttributes())}
}

// selectiveTracer is otelpgx's tracer without spans for the statements
// that open and close a transaction, or for those under untracedSQL (a
// River insert's): its other hooks (batches, copies, prepares, connects)
// are otelpgx's own.
type selectiveTracer struct{ *otelpgx.Tracer }

// untracedSQL marks a context whose statements get no span.
type untracedSQL struct{}

func (t selectiveTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if ctx.Value(untracedSQL{}) != nil {
		return ctx
	}
	if isTxControl(data.SQL) {
		return context.WithValue(ctx, untracedSQL{}, true)
	}
	return t.Tracer.TraceQueryStart(ctx, conn, data)
}

func (t selectiveTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if ctx.Value(untracedSQL{}) != nil {
		return
	}
	t.Tracer.TraceQueryEnd(ctx, conn, data)
}

// isTxControl reports whether sql is what pgx sends to begin, commit or
// roll back a transaction ("begin", "begin isolation level …", "commit",
// "rollback").
func isTxControl(sql string) bool {
	word, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	return strings.EqualFold(word, "begin") || strings.EqualFold(word, "commit") || strings.EqualFold(word, "rollback")
}

// River traces River: a span for each insert, and one for each
// job's work, linked to the insert's through the job's metadata. The
// insert's statement gets no span of its own (Postgres): the second
// middleware runs inside otelriver's and marks the context River runs it
// with.
func River() []rivertype.Middleware {
	return []rivertype.Middleware{
		otelriver.NewMiddleware(&otelriver.MiddlewareConfig{EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true}),
		river.JobInsertMiddlewareFunc(func(ctx context.Context, _ []*rivertype.JobInsertParams,
			doInner func(context.Context) ([]*rivertype.JobInsertResult, error),
		) ([]*rivertype.JobInsertResult, error) {
			return doInner(context.WithValue(ctx, untracedSQL{}, true))
		}),
	}
}
