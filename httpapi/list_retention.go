package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/domainclass/domainclass/db"
)

// listRowsFit refuses an upload of rows that would take caller's stored
// list rows (its lists' rows, ended or not, until they are purged) over
// its MaxStoredRows: 413 when the list alone is over it, else 429 saying
// how many are stored and when the soonest of its lists expires. exec is
// the transaction when given; under the caller's list lock
// (db.ListActiveLock) the sum is exact however many uploads arrive at once.
func (s *Server) listRowsFit(ctx context.Context, caller Caller, rows int, exec ...db.DBTX) error {
	var e db.DBTX = s.cfg.DB.Pool
	if len(exec) > 0 {
		e = exec[0]
	}
	limit := int64(caller.MaxStoredRows)
	if int64(rows) > limit {
		return &problem{status: http.StatusRequestEntityTooLarge, slug: "list-too-large",
			detail: fmt.Sprintf("The list has %d rows; your key may keep at most %d list rows stored. Split the list.", rows, limit)}
	}
	stored, err := db.ListStorageOf(ctx, e, caller.Name)
	if err != nil {
		return err
	}
	if stored.Rows+int64(rows) <= limit {
		return nil
	}
	retention := s.cfg.Queue.ListRetention
	when, retryAfter := fmt.Sprintf("None of your lists has ended yet; a list's rows count until %s after it ends.",
		days(retention)), listRetryAfter
	if next := stored.NextExpiry; next != nil {
		when = fmt.Sprintf("Your soonest list to go is purged after %s (its rows stop counting within the hour after): "+
			"download the results you need before then.", next.UTC().Format(time.RFC3339))
		retryAfter = max(time.Until(*next), listRetryAfter)
	}
	return &problem{status: http.StatusTooManyRequests, slug: "too-many-stored-rows", retryAfter: retryAfter,
		detail: fmt.Sprintf("You have %d rows stored in lists; %d more would cross your limit of %d. %s",
			stored.Rows, rows, limit, when)}
}

// days says d in days when it is whole days ("30 days"), else as Go does.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
