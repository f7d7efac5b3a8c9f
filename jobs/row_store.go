package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
)

// The reviewed settings of a worker process's row store.
const (
	// defaultRowStoreEvery: an answer waits at most 100 ms for the set it
	// is stored with, so a list's progress moves as its answers come and
	// its counters are written ten times a second, not once per answer.
	defaultRowStoreEvery = 100 * time.Millisecond
	// defaultRowStoreMax: a set is stored as soon as it has 500 answers
	// (a fraction of a second of the fastest drain measured).
	defaultRowStoreMax = 500
)

// RowStore stores the answers of a worker process's list chunks in sets:
// each answer is handed over as it comes (the domain's slot is free at
// once), and every Every, or as soon as Max answers wait, the answers of
// every list are stored in one transaction (db.ListRowsStore): their
// rows, duplicates, provenance, shared results, claims released and each
// list's counters, once per list. A set that fails is tried again, a
// list at a time, for RetryFor; its answers' done then get the error (the
// chunk keeps them, Pipeline.Keep, for its next run).
//
// Every zero stores each answer at once, in the caller's goroutine, as a
// set of one: what a chunk worked on a transaction (tests) uses. One per
// worker process; safe for concurrent use.
type RowStore struct {
	DB       db.Executor
	Every    time.Duration
	Max      int
	RetryFor time.Duration
	Lists    *ListMetrics // nil: no metrics
	Logger   *slog.Logger

	mu      sync.Mutex
	pending []heldAnswer
	running bool
	full    chan struct{}
}

// heldAnswer is an answer waiting for its set, and who waits for it.
type heldAnswer struct {
	list uuid.UUID
	a    db.RowAnswer
	done func(error)
}

// NewRowStore is a process's row store on exec with the reviewed
// settings; an answer it cannot store is tried again for retryFor.
func NewRowStore(exec db.Executor, retryFor time.Duration, lists *ListMetrics, logger *slog.Logger) *RowStore {
	return &RowStore{DB: exec, Every: defaultRowStoreEvery, Max: defaultRowStoreMax, RetryFor: retryFor, Lists: lists, Logger: logger}
}

// Put hands an answer of list's row over to be stored, with its owner's
// claim on the domain released; done is called once with the outcome.
func (s *RowStore) Put(list uuid.UUID, a db.RowAnswer, done func(error)) {
	if s.Every <= 0 {
		s.store([]heldAnswer{{list: list, a: a, done: done}})
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, heldAnswer{list: list, a: a, done: done})
	if s.full == nil {
		s.full = make(chan struct{}, 1)
	}
	if len(s.pending) >= max(s.Max, 1) {
		select {
		case s.full <- struct{}{}:
		default:
		}
	}
	if !s.running {
		s.running = true
		go s.loop()
	}
	s.mu.Unlock()
}

// loop stores what waits, a set every Every (or once Max wait), and ends
// when nothing is left: no goroutine outlives the answers it stores.
func (s *RowStore) loop() {
	t := time.NewTimer(s.Every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.full:
		}
		s.mu.Lock()
		set := s.pending
		s.pending = nil
		if len(set) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.store(set)
		t.Reset(s.Every)
	}
}

// store stores a set, every list's answers in one transaction; when that
// fails, each list's on their own (one list's failure does not hold the
// others'), each tried again for RetryFor (storeRetrying). Each answer's
// done is called once.
func (s *RowStore) store(set []heldAnswer) {
	lists := groupByList(set)
	ctx := context.Background()
	if len(lists) > 1 {
		tctx, cancel := context.WithTimeout(ctx, storeTryTimeout)
		err := s.try(tctx, lists)
		cancel()
		if err == nil {
			s.finish(set, nil, nil)
			return
		}
	}
	for _, one := range lists {
		err := storeRetrying(ctx, s.log(), s.RetryFor, 100*time.Millisecond, fmt.Sprintf("a set of %d answers", len(one.Answers)),
			func(ctx context.Context) error { return s.try(ctx, []db.RowSet{one}) })
		s.finish(set, &one.ListID, err)
	}
}

// finish tells the answers in set of list (every list: nil) how their
// store went.
func (s *RowStore) finish(set []heldAnswer, list *uuid.UUID, err error) {
	for _, h := range set {
		if list == nil || h.list == *list {
			h.done(err)
		}
	}
}

func (s *RowStore) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// groupByList is set's answers as one RowSet per list, in the order the
// lists first come. A row answered twice in the set keeps its first.
func groupByList(set []heldAnswer) []db.RowSet {
	type key struct {
		list uuid.UUID
		row  int
	}
	var lists []db.RowSet
	at := map[uuid.UUID]int{}
	seen := map[key]bool{}
	for _, h := range set {
		if k := (key{h.list, h.a.Row}); seen[k] {
			continue
		} else {
			seen[k] = true
		}
		i, ok := at[h.list]
		if !ok {
			i = len(lists)
			at[h.list] = i
			lists = append(lists, db.RowSet{ListID: h.list})
		}
		lists[i].Answers = append(lists[i].Answers, h.a)
	}
	return lists
}

// try stores sets in one transaction, and counts the rows made final.
func (s *RowStore) try(ctx context.Context, sets []db.RowSet) error {
	out, err := db.ListRowsStore(ctx, s.DB, sets)
	if err != nil {
		return err
	}
	for _, o := range out {
		s.Lists.ListRows(classifier.StatusCompleted, o.Completed)
		s.Lists.ListRows(classifier.StatusFailed, o.Failed)
	}
	return nil
}
