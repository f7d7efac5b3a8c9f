package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier/netguard"
)

// deliver POSTs body to target, signed per Standard Webhooks, and turns the
// receiver's answer (or its silence) into the delivery's outcome.
func (w *WebhookWorker) deliver(ctx context.Context, log *slog.Logger, job *river.Job[WebhookArgs], target *url.URL, body []byte) error {
	wid := job.Args.WebhookID()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return w.skip(ctx, log, fmt.Errorf("the callback URL cannot be requested: %w", err))
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.UserAgent)
	req.Header.Set(headerWebhookID, wid)
	req.Header.Set(headerWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(headerWebhookSignature, SignWebhook(w.Key, wid, now, body))

	dest := redactURL(target)
	// A client span, and its context on the request (traceparent): the
	// receiver can join the trace. The span names the host, never the URL,
	// whose query may hold the receiver's token.
	ctx, span := tracer().Start(ctx, "webhook POST", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("server.address", target.Hostname()),
			attribute.String("domainclass.webhook.id", wid)))
	defer span.End()
	req = req.WithContext(ctx)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := w.Client.Do(req)
	spanStatus(span, resp, err)
	if err != nil {
		return w.noAnswer(ctx, log, job, dest, now, err)
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, webhookMaxResponseBytes))
	_ = resp.Body.Close()
	elapsed := time.Since(now)
	w.recordOutput(ctx, log, webhookOutput{WebhookID: wid, StatusCode: resp.StatusCode, DurationMS: elapsed.Milliseconds()})
	log = log.With("status", resp.StatusCode, "duration", elapsed.String())
	return w.answered(ctx, log, job, dest, resp, answer)
}

// spanStatus records the receiver's answer on the delivery's span.
func spanStatus(span trace.Span, resp *http.Response, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "no answer")
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 300 {
		span.SetStatus(codes.Error, resp.Status)
	}
}

// noAnswer is the outcome of a request that got no answer: a failure of
// the receiver (timeout, refused or failed connection), unless this worker
// is stopping.
func (w *WebhookWorker) noAnswer(ctx context.Context, log *slog.Logger, job *river.Job[WebhookArgs], dest string, start time.Time, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		// The client is stopping (soft stop): River puts the job back with
		// its attempt restored; this was no failure of the receiver.
		return ctx.Err()
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err // its message repeats the URL, query string included
	}
	w.recordOutput(ctx, log, webhookOutput{WebhookID: job.Args.WebhookID(), DurationMS: time.Since(start).Milliseconds()})
	return w.fail(ctx, log, job, fmt.Errorf("error delivering to %s: %w", dest, err))
}

// answered is the outcome of the receiver's answer: done on a 2xx; cancelled
// on 410 Gone; snoozed as asked on a 429 or 503 with Retry-After (at most
// WebhookMaxThrottles times); a failure otherwise.
func (w *WebhookWorker) answered(ctx context.Context, log *slog.Logger, job *river.Job[WebhookArgs], dest string,
	resp *http.Response, answer []byte) error {
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		log.InfoContext(ctx, "webhook delivered")
		w.report(webhookDelivered)
		return nil
	case code == http.StatusGone:
		log.WarnContext(ctx, "webhook receiver answered 410 Gone; no further attempts")
		w.report(webhookGone)
		return river.JobCancel(fmt.Errorf("%s answered 410 Gone: the receiver asked for no more deliveries", dest))
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if after, ok := netguard.ParseRetryAfter(resp.Header, time.Now()); ok && snoozes(job) < w.Settings.WebhookMaxThrottles {
			after = min(after, w.Settings.MaxSnooze)
			log.InfoContext(ctx, "webhook receiver throttled; waiting as asked", "retry_after", after.String())
			w.report(webhookThrottled)
			return river.JobSnooze(after)
		}
	}
	return w.fail(ctx, log, job, fmt.Errorf("%s answered %d%s", dest, resp.StatusCode, excerpt(answer)))
}

// snoozes is how often River has snoozed the job (its "snoozes" metadata).
func snoozes(job *river.Job[WebhookArgs]) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &meta)
	return meta.Snoozes
}

// redactURL names a callback in logs and errors without its query string or
// credentials, which may hold a token.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// excerpt is the start of a receiver's answer, for the error River records.
func excerpt(b []byte) string {
	const limit = 200
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > limit {
		return fmt.Sprintf(": %q…", b[:limit])
	}
	return fmt.Sprintf(": %q", b)
}
