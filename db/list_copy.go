package db

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/domainclass/domainclass/classifier"
)

// ListRowIn is one uploaded row as COPY writes it.
type ListRowIn struct {
	Row    int
	Input  string
	Ref    string // "" for none
	Domain string // "" when rejected
	// FirstRow is the earlier row with the same domain; 0 for the first.
	FirstRow int
	// Reason is why the row was rejected; "" for a valid row.
	Reason string
}

// ListRowSource yields uploaded rows in order; Err reports why it stopped
// early (a body that could not be read, a limit crossed).
type ListRowSource interface {
	Next() bool
	Row() ListRowIn
	Err() error
}

// ListRowsCopy writes a list's rows with COPY, as the source yields them,
// and returns how many it wrote. A source error aborts the COPY; the caller
// rolls the transaction back.
func ListRowsCopy(ctx context.Context, exec DBTX, listID uuid.UUID, src ListRowSource) (int64, error) {
	n, err := exec.CopyFrom(ctx, pgx.Identifier{"list_row"}, listRowColumns,
		&copySource{listID: pgtype.UUID{Bytes: listID, Valid: true}, src: src})
	if err != nil {
		if serr := src.Err(); serr != nil {
			return n, serr // the source's own error, not COPY's wrapping of it
		}
		return n, translate(err)
	}
	return n, nil
}

// listRowColumns are the columns of an uploaded row, in copySource's
// order.
var listRowColumns = []string{"list_id", "row", "input", "ref", "domain", "first_row", "status", "error"}

type copySource struct {
	// listID is boxed once, and as pgtype's own UUID: pgx fails to encode a
	// uuid.UUID in COPY's binary format and falls back to text, through a
	// formatted error, for every row (half of an upload's CPU).
	listID any
	src    ListRowSource
	values []any
	// answers, when not nil, are the rows' answers (ListRowsAccept): each
	// row is written with listRowAnswerColumns, answered or NULLs, and
	// counted in accepted.
	answers  *answerReader
	accepted *Accepted
}

var (
	pendingValue   any = string(classifier.StatusPending)
	rejectedValue  any = string(classifier.StatusRejected)
	completedValue any = string(classifier.StatusCompleted)
)

func (c *copySource) Next() bool { return c.src.Next() }

func (c *copySource) Err() error { return c.src.Err() }

// Values reuses one slice (pgx encodes a row before it asks for the next)
// and leaves NULLs as untyped nils, to allocate as little as a row allows.
func (c *copySource) Values() ([]any, error) {
	r := c.src.Row()
	status := pendingValue
	if r.Reason != "" {
		status = rejectedValue
	}
	c.values = append(c.values[:0], c.listID, int32(r.Row), r.Input, orNull(r.Ref), orNull(r.Domain), nil, status, orNull(r.Reason))
	if r.FirstRow > 0 {
		c.values[5] = int32(r.FirstRow)
	}
	if c.answers == nil {
		return c.values, nil
	}
	var k []any
	if r.Domain != "" {
		k = c.answers.answer(r.Row)
	}
	if k == nil {
		return append(c.values, nil, nil, nil, nil, nil, nil, nil, nil, nil), nil
	}
	c.values[6] = completedValue
	first := b2i(r.FirstRow == 0)
	if k[3] == overrideValue {
		c.accepted.OverrideRows++
		c.accepted.Override += first
	} else {
		c.accepted.CacheRows++
		c.accepted.Cache += first
	}
	return append(c.values, k...), nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}
