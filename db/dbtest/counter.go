package dbtest

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// QueryCounter counts the queries a pool sends: give it as db.Config.Tracer.
type QueryCounter struct{ n atomic.Int64 }

// N is how many queries have started.
func (q *QueryCounter) N() int64 { return q.n.Load() }

// TraceQueryStart implements pgx.QueryTracer.
func (q *QueryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (q *QueryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
