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
	// Gate, when set, is asked by the Completer before the call waits for
	// its slot, and its Pass entered once the call has its slot, right
	// before its request is sent. A list's gate takes a database
	// connection first (so that no slot is held while one is awaited),
	// then opens a Postgres transaction on it as the call enters (it locks
	// the list's row, db.ListGate) and holds it until the request has been
	// written to the provider, so a cancel orders itself against the calls
	// that are starting.
	Gate Gate
	// Spender, when set, counts the call against its caller's budget: the
	// pipeline reserves before the search and settles once the call ended
	// (a Postgres write each, jobs.Spenders); nil: not counted.
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

// A Gate is asked before a model call waits for its slot: it takes what
// the call will need to pass it (a list's: a database connection), waiting
// for it if it must, so that a call never holds a model slot while it
// waits for a connection. Its Pass is entered once the call has its slot.
type Gate func(ctx context.Context) (Pass, error)

// A Pass lets one model call through its gate.
type Pass struct {
	// Enter is called right before the call starts (its slot and the rate
	// allow it): it refuses the call with an error, or lets it go and
	// returns a leave, called once the call's request has been written to
	// the provider. It may block on, and write to, Postgres (a list's does).
	Enter func(ctx context.Context) (leave func(), err error)
	// Close gives back what the gate took for the call, once the call is
	// over, whether it entered or not; after leave it does nothing.
	Close func()
}
