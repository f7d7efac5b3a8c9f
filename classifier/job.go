package classifier

import (
	"time"

	"github.com/google/uuid"
)

// Job is a caller's request: one classifier over a list of domains.
type Job struct {
	ID          uuid.UUID
	Caller      string
	Classifier  string
	Status      Status
	Error       string
	CallbackURL string
	RiverJobID  int64
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
	Domains     []JobDomain
	// Want is what the job accepts as a cached answer (max_age, refresh).
	Want Want
}

// JobDomain is one domain of a job and, once final, this job's answer.
type JobDomain struct {
	Position int
	Input    string
	Result   Result // Status PENDING until answered
}

// Done counts the domains that are final.
func (j *Job) Done() int {
	n := 0
	for _, d := range j.Domains {
		if d.Result.Final() {
			n++
		}
	}
	return n
}

// Ended reports whether the job has ended, COMPLETED or FAILED.
func (j *Job) Ended() bool {
	return j.Status == StatusCompleted || j.Status == StatusFailed
}
