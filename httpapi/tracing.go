package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTrustIncomingTrace: a caller's trace context is linked, not
// continued (TRACE_TRUST_INCOMING). The API serves callers of other teams,
// even other organisations: a continued traceparent lets a caller choose
// our trace ids (and land in another's trace), decide through its sampled
// flag what a parent-based sampler keeps, and send its tracestate and
// baggage on to the model provider, the search and webhook receivers. Turn
// it on where every caller is a service of the same organisation, to see
// one trace from the caller through the API.
const DefaultTrustIncomingTrace = false

// traceRequests starts a server span per request (Config.TracerProvider).
// A caller's trace context (traceparent) is continued only with
// Config.TrustIncomingTrace; otherwise the span starts a trace of ours,
// linked to the caller's span, so that a caller decides neither our trace
// ids nor what is sampled, and its tracestate and baggage ride into
// nothing we send on.
// The span is named by the method and route pattern ("POST
// /domains/classify", never the path with its ids) and carries what the
// HTTP semantic conventions require of a server span: method, path,
// scheme, route, status code, and error.type for a 5xx. It leaves out what
// they only recommend (peer and server addresses, user agent, body sizes)
// and the query string, which a caller may fill with anything. otelhttp's
// handler, which set all of them and wrapped the body and writer to count
// bytes, was about a fifth of a traced accept's extra CPU
// (docs/BENCHMARKS.md, "tracing").
func (s *Server) traceRequests(c *gin.Context) {
	r := c.Request
	ctx, opts := s.incomingTrace(r)
	method, name := spanMethod(r.Method)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := append(method, semconv.URLPath(r.URL.Path), semconv.URLScheme(scheme))
	if route := c.FullPath(); route != "" {
		name += " " + route
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	ctx, span := s.tracer.Start(ctx, name, opts...)
	defer span.End()
	c.Request = r.WithContext(ctx)

	c.Next()

	status := c.Writer.Status()
	if !span.IsRecording() {
		return
	}
	if status >= http.StatusInternalServerError {
		code := strconv.Itoa(status)
		span.SetAttributes(semconv.HTTPResponseStatusCode(status), semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, "")
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
}

// incomingTrace is the context a request's span starts from, and how: the
// caller's trace context continued when trusted; else the request's own
// context, a new root, and a link to the caller's span (its ids only).
func (s *Server) incomingTrace(r *http.Request) (context.Context, []trace.SpanStartOption) {
	theirs := s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if s.cfg.TrustIncomingTrace {
		return theirs, nil
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot()}
	if sc := trace.SpanContextFromContext(theirs); sc.IsValid() {
		ids := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Remote: true})
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ids}))
	}
	return r.Context(), opts
}

// spanMethod is the http.request.method attribute and the span name's
// method: a method outside the metrics label's fixed set (methodLabel) is
// "_OTHER", and its span is named "HTTP", as the conventions ask. The
// caller's token is not kept (http.request.method_original): like a label
// value, it is anything a sender chose.
func spanMethod(method string) ([]attribute.KeyValue, string) {
	if methodLabel(method) == "other" {
		return []attribute.KeyValue{semconv.HTTPRequestMethodOther}, "HTTP"
	}
	return []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method)}, method
}
