package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
)

// TestTracing follows one accepted request through the traces an api and
// a worker process make, recorded by the SDK's in-memory span recorder:
// POST → River insert, then (linked) the classify job's work → search and
// model call → the webhook's insert, then (linked) its delivery, whose
// request carries the trace context to the receiver. No span carries a
// secret. Not parallel: it installs the global tracer provider, and puts
// the old one back.
func TestTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	oldTP, oldProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(oldTP)
		otel.SetTextMapPropagator(oldProp)
		_ = tp.Shutdown(context.Background()) // what still points at it records nothing more
	})

	const secret, model = "sk-test-secret", "test-model"
	webhookSecret := newWebhookSecret(t)
	rc := newHookReceiver(t)
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 5, "Makes snacks.") },
		map[string]string{"WEBHOOK_SECRET": webhookSecret, "CALLBACK_ALLOW_PRIVATE": "true", "AUTH": "on"})
	e.traced = true
	e.start(cli.RoleAPI)
	e.start(cli.RoleWorker)
	key := e.apiKey("traced")

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	status, body := e.post(`{"domains": ["acme.com"]}`, "Authorization", "Bearer "+key,
		"X-Callback-URL", rc.srv.URL+"/hooks?token=receiver-token", "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var job jobView
	require.NoError(t, json.Unmarshal(body, &job))
	var got []hookDelivery
	require.Eventually(t, func() bool { got = rc.forJob(job.JobID); return len(got) == 1 }, dbtest.Patience(), 10*time.Millisecond)
	// The receiver has its request before the job's work returns: wait
	// for the spans of both jobs' work to end.
	var spans []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		require.NoError(t, tp.ForceFlush(t.Context()))
		spans = rec.Ended()
		var classify, webhook bool
		for _, s := range spans {
			classify = classify || strings.HasPrefix(s.Name(), "river.work/classify")
			webhook = webhook || strings.HasPrefix(s.Name(), "river.work/webhook")
		}
		return classify && webhook
	}, dbtest.Patience(), 10*time.Millisecond, "the jobs' work spans end")
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	find := func(what string, ok func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, s := range spans {
			if ok(s) {
				return s
			}
		}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		require.Failf(t, "span not found", "%s among %q", what, names)
		return nil
	}
	childOf := func(child, parent sdktrace.ReadOnlySpan) bool {
		for p := child.Parent(); p.IsValid(); {
			if p.SpanID() == parent.SpanContext().SpanID() {
				return true
			}
			s, ok := byID[p.SpanID()]
			if !ok {
				return false
			}
			p = s.Parent()
		}
		return false
	}
	linkedTo := func(s, to sdktrace.ReadOnlySpan) bool {
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == to.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}
	attr := func(s sdktrace.ReadOnlySpan, k string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == k {
				return a.Value.Emit()
			}
		}
		return ""
	}

	post := find("POST /domains/classify", func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "POST /domains/classify" && s.SpanKind() == trace.SpanKindServer
	})
	require.False(t, post.Parent().IsValid(), "TRACE_TRUST_INCOMING is off: the caller's trace is not continued")
	require.NotEqual(t, callerTrace, post.SpanContext().TraceID().String())
	require.Len(t, post.Links(), 1)
	require.Equal(t, callerTrace, post.Links()[0].SpanContext.TraceID().String(), "only linked")
	insert := find("River insert under the POST", func(s sdktrace.ReadOnlySpan) bool {
		return strings.HasPrefix(s.Name(), "river.insert") && childOf(s, post)
	})
	find("a Postgres query under the POST", func(s sdktrace.ReadOnlySpan) bool {
		return (attr(s, "db.system") == "postgresql" || attr(s, "db.system.name") == "postgresql") && childOf(s, post)
	})
	for _, s := range spans { // a transaction's own statements have no spans (internal/tracing)
		require.NotContains(t, []string{"BEGIN", "COMMIT", "ROLLBACK", "begin", "commit", "rollback"}, s.Name())
	}
	work := find("classify work linked to the insert", func(s sdktrace.ReadOnlySpan) bool {
		return strings.HasPrefix(s.Name(), "river.work/classify") && linkedTo(s, insert)
	})
	find("search under the work", func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "search" && childOf(s, work) })
	call := find("model call under the work", func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "chat "+model && childOf(s, work)
	})
	require.Equal(t, trace.SpanKindClient, call.SpanKind())
	require.Equal(t, model, attr(call, "gen_ai.request.model"))
	require.NotEmpty(t, attr(call, "gen_ai.usage.input_tokens"))
	hookInsert := find("webhook insert under the work", func(s sdktrace.ReadOnlySpan) bool {
		return strings.HasPrefix(s.Name(), "river.insert") && childOf(s, work)
	})
	hookWork := find("webhook work linked to its insert", func(s sdktrace.ReadOnlySpan) bool {
		return strings.HasPrefix(s.Name(), "river.work/webhook") && linkedTo(s, hookInsert)
	})
	delivery := find("webhook POST under its work", func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "webhook POST" && childOf(s, hookWork)
	})
	require.Equal(t, "204", attr(delivery, "http.response.status_code"))
	traceparent := got[0].header.Get("traceparent")
	require.Contains(t, traceparent, delivery.SpanContext().TraceID().String(), "the receiver gets the delivery's trace context")
	require.Contains(t, traceparent, delivery.SpanContext().SpanID().String())

	// No secret in any span: name, attributes, events, status.
	for _, s := range spans {
		text := s.Name() + " " + s.Status().Description
		for _, a := range s.Attributes() {
			text += " " + string(a.Key) + "=" + a.Value.Emit()
		}
		for _, ev := range s.Events() {
			text += " " + ev.Name
			for _, a := range ev.Attributes {
				text += " " + a.Value.Emit()
			}
		}
		for _, secretText := range []string{key, secret, webhookSecret, "receiver-token"} {
			require.NotContains(t, text, secretText, "span %q", s.Name())
		}
	}

	// Inside one organisation, an API that trusts its callers continues
	// their traces.
	e.env["TRACE_TRUST_INCOMING"] = "true"
	trusting := e.start(cli.RoleAPI)
	req, err := http.NewRequest(http.MethodGet, trusting.APIURL()+"/readyz", nil)
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, tp.ForceFlush(t.Context()))
	spans = rec.Ended()
	readyz := find("GET /readyz", func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "GET /readyz" })
	require.Equal(t, callerTrace, readyz.SpanContext().TraceID().String())
	require.Equal(t, callerSpan, readyz.Parent().SpanID().String())
}
