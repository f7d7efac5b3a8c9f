package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/domainclass/domainclass/db"
)

// A database outage, as the logs tell it (issue 36: a 60-s Postgres outage
// wrote 460 River "Error fetching jobs" lines, 7 "Too many errors; giving
// up" and 1,162 WARN lines). The first failure that says the database
// cannot be reached is logged as one ERROR line, "database unreachable
// since T: cause"; while it lasts, failures that say so, and every Warn or
// Error line of River's (its producers, elector and notifier fail on each
// poll), are counted instead of printed, with a reminder every
// outageReminder; a probe of the database every outageProbe notices its
// return, logged as "database reachable again after 63s (N errors
// suppressed)". Other lines pass as they are.
const (
	outageReminder = time.Minute
	outageProbe    = time.Second
)

// Outage collapses a database outage's lines (above): the state an
// outageHandler and its derived handlers share, one per process, probing
// the process's pool.
type Outage struct {
	out              slog.Handler // where its own lines go
	reminder, period time.Duration

	mu         sync.Mutex
	probe      func(context.Context) error // nil: not yet, and no collapsing
	since      time.Time                   // zero: the database is reachable
	suppressed int                         // in the outage so far
	said       time.Time                   // the last line about it
	stop       chan struct{}               // closed by Close
	done       chan struct{}               // closed when the prober returns
}

// NewOutage returns an Outage writing to out. It collapses nothing until
// Watch gives it a probe of the database.
func NewOutage(out slog.Handler) *Outage {
	return &Outage{out: out, reminder: outageReminder, period: outageProbe, stop: make(chan struct{})}
}

// Watch makes o collapse outages, noticing their end with probe.
func (o *Outage) Watch(probe func(context.Context) error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probe = probe
}

// Close stops the prober of an outage in progress, and waits for it.
func (o *Outage) Close() {
	o.mu.Lock()
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	done := o.done
	o.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Handler is the process's handler: out, collapsing outages.
func (o *Outage) Handler() slog.Handler { return outageHandler{log: o, next: o.out} }

// Suppressed is how many lines the outage in progress held back (0 when
// none is).
func (o *Outage) Suppressed() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.suppressed
}

// outageHandler passes records to next, but those of an outage (see above).
// library marks River's: all its warnings during an outage are the outage's.
type outageHandler struct {
	log     *Outage
	next    slog.Handler
	attrs   []slog.Attr // WithAttrs's, which may carry the error
	library bool
}

// forLibrary is h for River's records.
func (h outageHandler) forLibrary() outageHandler { h.library = true; return h }

func (h outageHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h outageHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.next, h.attrs = h.next.WithAttrs(attrs), append(slices.Clip(h.attrs), attrs...)
	return h
}

func (h outageHandler) WithGroup(name string) slog.Handler {
	h.next = h.next.WithGroup(name)
	return h
}

func (h outageHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	cause, starts := unreachableCause(h.attrs, r, h.library)
	o := h.log
	o.mu.Lock()
	switch {
	case o.probe == nil || (o.since.IsZero() && !starts):
		o.mu.Unlock()
		return h.next.Handle(ctx, r)
	case o.since.IsZero():
		o.since, o.said, o.suppressed = time.Now(), time.Now(), 0
		o.done = make(chan struct{})
		go o.prober(o.probe, o.done)
		since := o.since
		o.mu.Unlock()
		return o.say(slog.LevelError, fmt.Sprintf("database unreachable since %s: %s", since.UTC().Format(time.RFC3339), cause),
			slog.Time("since", since), slog.String("error", cause))
	case cause != "" || h.library:
		o.suppressed++
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	return h.next.Handle(ctx, r)
}

// prober probes the database every period until it answers (then says so
// and ends the outage) or the log is closed, reminding every reminder.
func (o *Outage) prober(probe func(context.Context) error, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(o.period)
	defer tick.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), o.period)
		err := probe(ctx)
		cancel()
		o.mu.Lock()
		since, n := o.since, o.suppressed
		switch {
		case err == nil:
			o.since, o.suppressed = time.Time{}, 0
			o.mu.Unlock()
			_ = o.say(slog.LevelInfo, fmt.Sprintf("database reachable again after %s (%d errors suppressed)",
				time.Since(since).Round(time.Second), n), slog.Duration("outage", time.Since(since)), slog.Int("suppressed", n))
			return
		case time.Since(o.said) >= o.reminder:
			o.said = time.Now()
			o.mu.Unlock()
			_ = o.say(slog.LevelWarn, fmt.Sprintf("database still unreachable since %s (%d errors suppressed)",
				since.UTC().Format(time.RFC3339), n), slog.Time("since", since), slog.Int("suppressed", n))
		default:
			o.mu.Unlock()
		}
	}
}

func (o *Outage) say(level slog.Level, msg string, attrs ...slog.Attr) error {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	return o.out.Handle(context.Background(), r)
}

// unreachableCause is the error of a record (or of the attributes its
// logger carries) that says the database cannot be reached, "" when none
// does; and whether it is one that only continues an outage. Our own
// lines say it with an error of package db or pgx's (pgconn's connect
// error, a connection closed, Postgres starting up or shutting down;
// db.ErrUnavailable with a failed connection as its cause, or, during an
// outage, any cause). River's (library) are about its own statements and
// log their errors as text: a failed connection's text is enough — but a
// refused connection in our lines may be the model's or a webhook's.
func unreachableCause(attrs []slog.Attr, r slog.Record, library bool) (cause string, starts bool) {
	var visit func(a slog.Attr) bool
	visit = func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindGroup:
			for _, g := range v.Group() {
				if !visit(g) {
					return false
				}
			}
		case slog.KindAny:
			err, ok := v.Any().(error)
			switch {
			case !ok:
			case databaseLost(err) || (library && networkLostText(err.Error())):
				cause, starts = err.Error(), true
				return false
			case errors.Is(err, db.ErrUnavailable):
				cause = err.Error()
			}
		case slog.KindString:
			if a.Key != "err" && a.Key != "error" {
				break
			}
			if databaseLostText(v.String()) || (library && networkLostText(v.String())) {
				cause, starts = v.String(), true
				return false
			}
		}
		return true
	}
	for _, a := range attrs {
		if !visit(a) {
			return cause, starts
		}
	}
	r.Attrs(visit)
	return cause, starts
}

// databaseLost reports whether err is Postgres out of reach, not a
// query's failure or a busy pool.
func databaseLost(err error) bool {
	var (
		connect *pgconn.ConnectError
		pgErr   *pgconn.PgError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &connect), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	case errors.Is(err, db.ErrUnavailable): // db's: a connection that failed, not a deadline
		return (errors.As(err, &netErr) && !netErr.Timeout()) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
	}
	return databaseLostText(err.Error())
}

// databaseLostText reports whether an error's text says Postgres cannot be
// reached, in words only pgx, Postgres or package db use.
func databaseLostText(s string) bool {
	return containsAny(s, "failed to connect to `", "SQLSTATE 08", "SQLSTATE 57P01", "SQLSTATE 57P02", "SQLSTATE 57P03",
		"the database system is shutting down", "the database system is starting up",
		"terminating connection due to administrator command")
}

// networkLostText reports whether an error's text says a connection
// failed: of River's, the database's.
func networkLostText(s string) bool {
	return containsAny(s, "connection refused", "connection reset by peer", "broken pipe", "unexpected EOF", "conn closed",
		"server closed the connection unexpectedly", "dial tcp", "no such host", "i/o timeout", "the database is unavailable")
}

func containsAny(s string, signs ...string) bool {
	for _, sign := range signs {
		if strings.Contains(s, sign) {
			return true
		}
	}
	return false
}
