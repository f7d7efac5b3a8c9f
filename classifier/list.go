package classifier

import (
	"time"

	"github.com/google/uuid"
)

// List is a caller's upload of many rows under one classifier, answered in
// chunks of ChunkRows rows. Its progress is counted as rows become final.
type List struct {
	ID          uuid.UUID
	Caller      string
	Classifier  string
	Status      Status // PENDING, RUNNING, COMPLETED, CANCELLED or FAILED
	Error       string
	CallbackURL string
	// Rows is every row uploaded; Domains the distinct valid domains among
	// them; Duplicates the valid rows whose domain an earlier row has;
	// Rejected the rows that are not a domain.
	Rows, Domains, Duplicates, Rejected int
	ChunkRows, Chunks                   int
	// Done counts the rows final so far (Rejected included); Completed and
	// Failed split the answered ones, Override, Cache and LLM count the
	// completed ones by where their answer came from (Known, those a list
	// answered from the known list before overrides replaced it).
	Done, Completed, Failed, Override, Known, Cache, LLM int
	// Tier is how fresh domains are asked: TierStandard (one call at a
	// time) or TierEconomy (the provider's Batch API). CostUSD is what the
	// list's model calls cost so far, from the price table.
	Tier    string
	CostUSD float64
	// Want is what the list accepts as a cached answer (max_age, refresh).
	Want                   Want
	CreatedAt              time.Time
	StartedAt, CompletedAt *time.Time
	// Retention is how long the list and its rows are kept once it has
	// ended (LIST_RETENTION when it was uploaded); then they are purged.
	Retention time.Duration
	// Retries counts the retries of its failed rows (POST
	// /lists/{id}/retry): the pass its chunks belong to.
	Retries int
	// Waiting says, while it runs, what its work waits for (a provider
	// outage, a worker process that died, another job's claim), since
	// WaitingSince; "" when nothing. LastError is its work's last failure,
	// at LastErrorAt; RunErrors counts the runs of its work that failed and
	// were tried again.
	Waiting      string
	WaitingSince *time.Time
	LastError    string
	LastErrorAt  *time.Time
	RunErrors    int
}

// List tiers.
const (
	TierStandard = "standard"
	TierEconomy  = "economy"
)

// Ended reports whether the list has ended: COMPLETED, CANCELLED or FAILED.
func (l *List) Ended() bool {
	return l.Status == StatusCompleted || l.Status == StatusCancelled || l.Status == StatusFailed
}

// ExpiresAt is when an ended list is purged (at the earliest: the purge
// runs hourly), nil while it runs: until then its results can be
// downloaded.
func (l *List) ExpiresAt() *time.Time {
	if !l.Ended() || l.CompletedAt == nil {
		return nil
	}
	t := l.CompletedAt.Add(l.Retention)
	return &t
}

// Unfinished is how many rows were not final when the list was cancelled
// or given up: they are reported CANCELLED, or FAILED with the list's error.
func (l *List) Unfinished() int {
	if l.Status == StatusCancelled || l.Status == StatusFailed {
		return l.Rows - l.Done
	}
	return 0
}

// ChunkRange returns the first and last row of chunk (from 0).
func (l *List) ChunkRange(chunk int) (from, to int) {
	return chunk*l.ChunkRows + 1, min((chunk+1)*l.ChunkRows, l.Rows)
}

// ListRow is one row of a list as uploaded, with its answer once final.
type ListRow struct {
	Row   int // from 1, in upload order
	Input string
	Ref   string // the caller's own id of the row, "" for none
	// Result holds the row's domain (empty when REJECTED) and answer; its
	// Status is PENDING, COMPLETED, FAILED, REJECTED or, when the list was
	// cancelled before it was answered, CANCELLED.
	Result Result
}
