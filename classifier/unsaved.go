package classifier

import (
	"sync"
	"time"
)

// unsaved holds the model's answers that arrived but could not be stored
// (the database was down longer than a run retries a store): the next run
// of a job in this process that needs the domain stores the kept answer
// instead of paying for another call. Answers die with the process, like a
// call in flight does (the cost bar's one exception).
type unsaved struct {
	mu      sync.Mutex
	answers map[unsavedKey]unsavedAnswer
}

type unsavedKey struct{ classifier, domain string }

type unsavedAnswer struct {
	result Result
	until  time.Time
}

const (
	// unsavedMax bounds the answers kept: an answer with its evidence is a
	// few kB, so at most a few MB; more than a process's model calls in an
	// outage of several minutes.
	unsavedMax = 4096
	// unsavedTTL: an answer not stored within an hour is dropped; its
	// domain is asked again (the job has long been retried, or failed).
	unsavedTTL = time.Hour
)

// Keep remembers r, a model's answer that could not be stored, for the
// next Classify of its domain in this process. It reports false when the
// answer is not one to keep (not the model's) or too many are kept.
func (p *Pipeline) Keep(r Result) bool {
	if r.Source != SourceLLM || r.Status == StatusPending {
		return false
	}
	u := p.unsaved
	u.mu.Lock()
	defer u.mu.Unlock()
	now := p.cfg.Now()
	if u.answers == nil {
		u.answers = map[unsavedKey]unsavedAnswer{}
	}
	if len(u.answers) >= unsavedMax {
		for k, a := range u.answers {
			if now.After(a.until) {
				delete(u.answers, k)
			}
		}
		if len(u.answers) >= unsavedMax {
			return false
		}
	}
	u.answers[unsavedKey{r.Classifier, r.Domain}] = unsavedAnswer{result: r, until: now.Add(unsavedTTL)}
	return true
}

// kept takes back the answer Keep remembered for domain, if want accepts
// it; the caller stores it (and Keeps it again if that fails too).
func (p *Pipeline) kept(c *Classifier, domain string, want Want) (*Result, bool) {
	u := p.unsaved
	u.mu.Lock()
	defer u.mu.Unlock()
	k := unsavedKey{c.Name, domain}
	a, ok := u.answers[k]
	if !ok {
		return nil, false
	}
	delete(u.answers, k)
	now := p.cfg.Now()
	if now.After(a.until) || (a.result.Status == StatusCompleted && !want.Accepts(&a.result, now)) {
		return nil, false
	}
	return &a.result, true
}
