// Package admission decides whether a caller's list is let in, and what it
// is estimated to take: its model calls, their cost and, for a dry run,
// its time. It is one function, List, asked at each moment an upload is
// decided on: before its body is read (what the caller's state already
// refuses), in a dry run (the estimate, refusing nothing), and in the
// upload's transaction once its rows are in (exact, under the caller's
// lock), and again when an ended list is asked to run again. The API calls
// it before the body and for the dry run, jobs.AcceptList in the
// transaction; its refusals are typed errors that the API words as
// problems (httpapi/problem.go).
//
// A package of its own rather than part of jobs: it needs nothing of
// River, the API's dry run calls it without accepting anything, and the
// estimate (the deployment's throughput, the callers' money) is a concern
// of its own, not the queue's.
package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/wire"
)

// Stage is the moment a list is asked about.
type Stage int

const (
	// BeforeBody: the upload's headers are read, not its body. Its
	// caller's lists not yet ended (counting Request.Uploading) and its
	// stored rows (as if the list had one row) are checked.
	BeforeBody Stage = iota + 1
	// DryRun: the rows are read, not written. Nothing is refused; the
	// admission carries the whole estimate (rows, calls, cost per tier,
	// time and its basis).
	DryRun
	// Written: in the upload's transaction, once its rows are in (so that
	// they can be counted and priced), before the list is written: the
	// caller's daily budget, unless RunPartly, then, under the caller's
	// lock, its lists not yet ended and its stored rows, exactly.
	Written
	// Resumed: an ended list asked to run again (its failed rows retried):
	// the caller's lists not yet ended, in the retry's transaction.
	Resumed
)

// Limits are a caller's limits on lists.
type Limits struct {
	// MaxActiveLists is how many of its lists may be not yet ended.
	MaxActiveLists int
	// MaxStoredRows is how many rows its lists, ended or not, may hold
	// until they are purged.
	MaxStoredRows int
	// ListRetention is how long an ended list is kept (for the refusal's
	// words).
	ListRetention time.Duration
}

// Request is a list asked about at Stage.
type Request struct {
	Stage Stage
	// List is the list as known at Stage: its Caller always; its
	// classifier, tier, Want and counts from DryRun on; its ID, its rows
	// written, at Written.
	List *classifier.List
	// Limits are its caller's.
	Limits Limits
	// Estimator prices and times it.
	Estimator Estimator
	// RunPartly: a list whose estimate is over the caller's daily budget
	// is let in, to run up to it (?over_budget=run_partly).
	RunPartly bool
	// Uploading is the caller's other uploads in progress that would be
	// lists (BeforeBody): they count as lists.
	Uploading int
	// Domains are the list's distinct domains (DryRun: its rows are not
	// written).
	Domains db.DomainSource
}

// Admission is what a list let in is estimated to take.
type Admission struct {
	// Counted: ModelCalls and CostUSD were estimated (DryRun; Written for
	// a caller with a budget, unless RunPartly). Priced: the price table
	// lists the model; CostUSD is 0 when it does not.
	Counted bool
	Priced  bool
	// ModelCalls is the calls its fresh domains are estimated to make.
	ModelCalls int
	// CostUSD is their price (llm.Pricer.CallCost), to the micro-dollar.
	CostUSD float64
	// Estimate is the dry run's whole estimate (DryRun only).
	Estimate wire.ListEstimate
}

// List decides on r.List at r.Stage, in exec (the upload's transaction at
// Written and Resumed, whose caller's lock it takes at Written). It returns
// the admission, or one of this package's errors (*TooManyListsError,
// *ListTooLargeError, *StoredRowsFullError, *OverBudgetError,
// *ExceedsBudgetError), db.ErrUnavailable or another error.
func List(ctx context.Context, exec db.DBTX, r Request) (Admission, error) {
	caller := r.List.Caller
	switch r.Stage {
	case BeforeBody:
		if err := activeListsFree(ctx, exec, caller, r.Limits.MaxActiveLists, r.Uploading); err != nil {
			return Admission{}, err
		}
		return Admission{}, storedRowsFit(ctx, exec, caller, r.Limits, 1)
	case DryRun:
		return estimate(ctx, exec, r)
	case Written:
		a, err := budget(ctx, exec, r)
		if err != nil {
			return a, err
		}
		if err := db.ListActiveLock(ctx, exec, caller); err != nil {
			return a, err
		}
		if err := activeListsFree(ctx, exec, caller, r.Limits.MaxActiveLists, 0); err != nil {
			return a, err
		}
		return a, storedRowsFit(ctx, exec, caller, r.Limits, r.List.Rows)
	case Resumed:
		return Admission{}, activeListsFree(ctx, exec, caller, r.Limits.MaxActiveLists, 0)
	}
	return Admission{}, fmt.Errorf("admission: unknown stage %d", r.Stage)
}

// TooManyListsError: the caller has Active lists not yet ended and
// Uploading uploads in progress that would be lists, and may have Max.
type TooManyListsError struct{ Active, Uploading, Max int }

func (e *TooManyListsError) Error() string {
	return fmt.Sprintf("%d lists not yet ended and %d uploads in progress; the limit is %d", e.Active, e.Uploading, e.Max)
}

// ListTooLargeError: the list's Rows alone are more than the caller may
// keep stored (Limit); no wait makes it fit.
type ListTooLargeError struct{ Rows, Limit int64 }

func (e *ListTooLargeError) Error() string {
	return fmt.Sprintf("a list of %d rows, over the limit of %d stored rows", e.Rows, e.Limit)
}

// StoredRowsFullError: the caller's lists hold Stored rows, and Rows more
// would cross Limit. NextExpiry is when its soonest ended list is purged
// (nil: none has ended; its rows count until Retention after it ends).
type StoredRowsFullError struct {
	Stored, Rows, Limit int64
	NextExpiry          *time.Time
	Retention           time.Duration
}

func (e *StoredRowsFullError) Error() string {
	return fmt.Sprintf("%d rows stored, %d more would cross the limit of %d", e.Stored, e.Rows, e.Limit)
}

// activeListsFree refuses a list when caller has max lists not yet ended,
// counting uploading as lists.
func activeListsFree(ctx context.Context, exec db.DBTX, caller string, max, uploading int) error {
	n, err := db.ListActiveCount(ctx, exec, caller)
	if err != nil {
		return err
	}
	if n+uploading >= max {
		return &TooManyListsError{Active: n, Uploading: uploading, Max: max}
	}
	return nil
}

// storedRowsFit refuses rows that would take caller's stored list rows
// (its lists' rows, ended or not, until they are purged) over its limit.
// Under the caller's list lock (db.ListActiveLock) the sum is exact
// however many uploads arrive at once.
func storedRowsFit(ctx context.Context, exec db.DBTX, caller string, l Limits, rows int) error {
	limit := int64(l.MaxStoredRows)
	if int64(rows) > limit {
		return &ListTooLargeError{Rows: int64(rows), Limit: limit}
	}
	stored, err := db.ListStorageOf(ctx, exec, caller)
	if err != nil {
		return err
	}
	if stored.Rows+int64(rows) <= limit {
		return nil
	}
	return &StoredRowsFullError{Stored: stored.Rows, Rows: int64(rows), Limit: limit, NextExpiry: stored.NextExpiry,
		Retention: l.ListRetention}
}
