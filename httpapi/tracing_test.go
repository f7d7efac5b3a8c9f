package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceRequests: with a tracer provider, each request gets a server
// span named by its method and route pattern, with the attributes the HTTP
// semantic conventions require, continuing the caller's traceparent; a 5xx
// marks it failed.
func TestTraceRequests(t *testing.T) {
	t.Parallel()
	setupTraced := func(t *testing.T, opts setupOpts) (*testBundle, *tracetest.SpanRecorder) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		opts.tracer = tp
		return setup(t, opts), rec
	}
	last := func(t *testing.T, rec *tracetest.SpanRecorder) (sdktrace.ReadOnlySpan, map[string]string) {
		t.Helper()
		ended := rec.Ended()
		require.NotEmpty(t, ended)
		s := ended[len(ended)-1]
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		return s, attrs
	}

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

	t.Run("StartsItsOwnTraceLinkedToTheCallersByDefault", func(t *testing.T) {
		t.Parallel()
		b, rec := setupTraced(t, setupOpts{})
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.com"]}`,
			"traceparent", "00-"+traceID+"-"+parentID+"-01", "tracestate", "evil=1")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		s, _ := last(t, rec)
		require.Equal(t, "POST /domains/classify", s.Name())
		require.False(t, s.Parent().IsValid(), "a caller's traceparent is not ours to continue")
		require.NotEqual(t, traceID, s.SpanContext().TraceID().String())
		require.Len(t, s.Links(), 1, "the caller's trace is linked, for finding it")
		link := s.Links()[0].SpanContext
		require.Equal(t, traceID, link.TraceID().String())
		require.Equal(t, parentID, link.SpanID().String())
		require.Empty(t, link.TraceState().String(), "the caller's tracestate is not kept")
	})

	t.Run("ContinuesTheCallersTraceWhenTrusted", func(t *testing.T) {
		t.Parallel()
		b, rec := setupTraced(t, setupOpts{trustTrace: true})
		r := b.do(t, "POST", "/domains/classify?debug=1", `{"domains": ["acme.com"]}`,
			"traceparent", "00-"+traceID+"-"+parentID+"-01")
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		s, attrs := last(t, rec)
		require.Equal(t, "POST /domains/classify", s.Name())
		require.Equal(t, trace.SpanKindServer, s.SpanKind())
		require.Equal(t, traceID, s.SpanContext().TraceID().String())
		require.Equal(t, parentID, s.Parent().SpanID().String())
		require.Equal(t, map[string]string{"http.request.method": "POST", "url.path": "/domains/classify",
			"url.scheme": "http", "http.route": "/domains/classify", "http.response.status_code": "202"}, attrs,
			"the query string is left out")
		require.Equal(t, codes.Unset, s.Status().Code)
	})

	t.Run("NamesByRoutePattern", func(t *testing.T) {
		t.Parallel()
		b, rec := setupTraced(t, setupOpts{})
		r := b.do(t, "GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", "")
		require.Equal(t, http.StatusNotFound, r.status)
		s, attrs := last(t, rec)
		require.Equal(t, "GET /domains/classify/:job_id", s.Name())
		require.False(t, s.Parent().IsValid(), "no traceparent: a root span")
		require.Equal(t, "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", attrs["url.path"])
		require.Equal(t, "404", attrs["http.response.status_code"])
		require.Equal(t, codes.Unset, s.Status().Code, "a 4xx is the caller's, not the server's, failure")

		b.do(t, "GET", "/nope", "")
		s, attrs = last(t, rec)
		require.Equal(t, "GET", s.Name(), "no route: the method alone")
		require.NotContains(t, attrs, "http.route")

		b.do(t, "BREW", "/domains/classify", "")
		s, attrs = last(t, rec)
		require.Equal(t, "HTTP", s.Name(), "a method no route has: no route either")
		require.Equal(t, "_OTHER", attrs["http.request.method"])
		require.NotContains(t, attrs, "http.request.method_original",
			"a made-up method is any token the caller chose: not exported, as it is not a metrics label")
	})

	t.Run("ServerErrorFails", func(t *testing.T) {
		t.Parallel()
		b, rec := setupTraced(t, setupOpts{db: downDB(t)})
		require.Equal(t, http.StatusServiceUnavailable, b.do(t, "GET", "/readyz", "").status)
		s, attrs := last(t, rec)
		require.Equal(t, "GET /readyz", s.Name())
		require.Equal(t, "503", attrs["http.response.status_code"])
		require.Equal(t, "503", attrs["error.type"])
		require.Equal(t, codes.Error, s.Status().Code)
	})
}
