package httpapi

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests starts a server span per request (Config.TracerProvider),
// continuing the caller's trace context (traceparent) when it sends one.
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
	ctx := s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
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
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
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

// spanMethod is the http.request.method attribute and the span name's
// method: a method outside the standard set is "_OTHER" (the original in
// http.request.method_original), and its span is named "HTTP", as the
// conventions ask.
func spanMethod(method string) ([]attribute.KeyValue, string) {
	if methodLabel(method) == "other" {
		return []attribute.KeyValue{semconv.HTTPRequestMethodOther, semconv.HTTPRequestMethodOriginal(method)}, "HTTP"
	}
	return []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method)}, method
}
