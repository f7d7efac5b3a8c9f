package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/domainclass/domainclass/wire"
)

// Lists returns a page of the caller's lists, newest first (GET /lists):
// up to limit of them (0: the API's default), after the page whose
// NextCursor is cursor ("" for the first). It retries while the API is
// unavailable (503) or unreachable; other error answers come back as
// *ProblemError (400 for a bad limit or cursor).
func (c *Client) Lists(ctx context.Context, limit int, cursor string) (*wire.ListIndex, error) {
	l := ""
	if limit > 0 {
		l = strconv.Itoa(limit)
	}
	var idx wire.ListIndex
	if err := c.do(ctx, http.MethodGet, "/lists"+query("limit", l, "cursor", cursor), nil, nil, http.StatusOK, &idx,
		http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &idx, nil
}

// RetryList queues list id's FAILED and never-answered rows again (POST
// /lists/{id}/retry) and says how many. It is safe to repeat: a list still
// running, or with nothing failed, is left as it is (Requeued 0), so it
// retries while the API is unavailable (503) or unreachable. Other error
// answers come back as *ProblemError: 404 for an unknown list (or
// another caller's), 409 for a cancelled one, 429 when the caller has too
// many lists running.
func (c *Client) RetryList(ctx context.Context, id string) (*wire.ListRetried, error) {
	var r wire.ListRetried
	if err := c.do(ctx, http.MethodPost, wire.ListRetryURL(url.PathEscape(id)), nil, nil, http.StatusOK, &r,
		http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	return &r, nil
}
