package wire

// ListIndex is the answer to GET /lists: a page of the caller's lists,
// newest first. NextCursor, when set, asks for the next page (?cursor=).
type ListIndex struct {
	Lists      []ListStatus `json:"lists"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// ListRetried is the answer to POST /lists/{id}/retry: how many rows were
// queued again (0 when there was nothing to retry, or the list was still
// running), and the list's status after it.
type ListRetried struct {
	Requeued int        `json:"requeued"`
	List     ListStatus `json:"list"`
}

// ListRetryURL is where a list's failed rows are retried.
func ListRetryURL(id string) string { return "/lists/" + id + "/retry" }
