package classifier

import "context"

// CallOptions are how one domain's model call is counted and scheduled:
// the worker that answers the domain sets them, and they are passed as an
// argument down the pipeline (ClassifyWant, Stage, Decide, Ask) to the
// Completer that makes the call. The zero value is an interactive call,
// ungated and counted against no budget.
type CallOptions struct {
	// Share is whose call it is, for its turn at a model slot (the
	// Completer's scheduler, classifier/llm/share.go); zero: interactive.
	Share Share
	// Gate, when set, is asked by the Completer once the call has its
	// slot and right before its request is sent. A list's gate admits the
	// call into a Postgres transaction that holds the list's gate lock
	// (db.ListGate), shared by the list's calls that start within a short
	// window (jobs.ListGates), and keeps it open until the request has been
	// written to the provider, so a cancel orders itself against the calls
	// that are starting.
	Gate Gate
	// Spender, when set, counts the call against its caller's budget: the
	// pipeline reserves before the search and settles once the call ended
	// (spend.Spenders: a Postgres write each, or, for a list chunk, a set
	// of calls counted in one and corrected in another); nil: not counted.
	Spender Spender
}

// CallClass is who a model call serves, for the order in which calls get
// a model slot: every waiting interactive call before any list's.
type CallClass string

const (
	// ClassInteractive: a job of POST /domains/classify, whose caller is
	// waiting for ten answers. The class of a call whose Share is zero.
	ClassInteractive CallClass = "interactive"
	// ClassList: a row of a list.
	ClassList CallClass = "list"
)

// CallClasses lists every class, in the order they are served.
func CallClasses() []CallClass { return []CallClass{ClassInteractive, ClassList} }

// A Share names whose a model call is: its class and, for a list, the
// caller and the list.
type Share struct {
	Class  CallClass
	Caller string
	List   string
}

// A Gate is asked right before a model call starts (its slot and the rate
// allow it): it refuses the call with an error, or lets it go and returns a
// release, called once the call's request has been written to the
// provider. It may block on Postgres (a list's waits for its gate
// transaction to open).
type Gate func(ctx context.Context) (release func(), err error)
