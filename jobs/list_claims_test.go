package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
)

// A chunk claims its fresh domains as a set as it starts; those a run does
// not answer go back as it ends, and a domain another holds is left to it.
func TestClassifyListWorker_Claims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ARunGivesBackTheClaimsItDidNotAnswer", func(t *testing.T) {
		t.Parallel()
		s := listSettings(10, 1)
		s.ListChunkRunTime = time.Nanosecond // its time is up before its first domain
		b, w := setupListTx(t, byDomain(nil), s)
		acceptList(t, b.tx, b.client, s, "", "a.com", "b.com", "c.com", "a.com")
		job := rivertest.RequireInsertedTx[*riverpgxv5.Driver](ctx, t, b.tx, &jobs.ClassifyListArgs{}, nil)
		res, err := w.WorkJob(ctx, t, b.tx, job.JobRow)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateAvailable, res.Job.State, "snoozed to the queue's end: its time was up")
		require.Zero(t, b.llm.Total())
		var claims int
		require.NoError(t, b.tx.QueryRow(ctx, `SELECT count(*) FROM domain_claim WHERE owner = $1`,
			fmt.Sprintf("river:%d", job.ID)).Scan(&claims))
		require.Zero(t, claims, "no domain the run left is held for the chunk: a job may answer it meanwhile")
	})

	t.Run("ADomainAnotherHoldsIsAnsweredFromItsAnswer", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		b := setup(t, func(r llmtest.Request) llmtest.Reply {
			a := llmtest.Answer(true, 4, "Sells "+r.Domain+".")
			if r.Domain == "held.com" {
				a.Wait = release
			}
			return a
		}, setupOpts{claimWait: 100 * time.Millisecond, settings: func(s *jobs.Settings) { s.ListChunkRows, s.ListChunksInFlight = 10, 1 }})
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		// A job asks the model about held.com, and waits for its answer.
		jobID := b.submit(t, "held.com")
		require.Eventually(t, func() bool { return b.llm.Calls("held.com") == 1 }, dbtest.Patience(), 10*time.Millisecond)

		tx, err := b.db.Pool.Begin(ctx)
		require.NoError(t, err)
		s := testSettings()
		s.ListChunkRows, s.ListChunksInFlight = 10, 1
		l := acceptList(t, tx, b.client, s, "", "a.com", "held.com", "b.com")
		require.NoError(t, tx.Commit(ctx))

		// The chunk answers the rest, and waits for held.com: no second
		// call about it.
		for deadline := time.Now().Add(dbtest.Patience()); ; {
			require.Equal(t, 1, b.llm.Calls("held.com"), "held.com is asked about once, by the job that holds it")
			now, err := db.ListGet(ctx, b.db.Pool, l.ID)
			require.NoError(t, err)
			if now.Completed == 2 && strings.Contains(now.Waiting, "being answered by other work") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the chunk never answered a.com and b.com and said it waits for held.com: %+v", now)
			time.Sleep(20 * time.Millisecond) // a poll, as require.Eventually's
		}
		var owner string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT owner FROM domain_claim WHERE domain = 'held.com'`).Scan(&owner))
		require.Equal(t, fmt.Sprintf("river:%d", b.job(t, jobID).RiverJobID), owner, "the job holds it still")

		close(release)
		b.waitJob(t, jobID, classifier.StatusCompleted)
		var done *classifier.List
		require.Eventually(t, func() bool {
			done, err = db.ListGet(ctx, b.db.Pool, l.ID)
			require.NoError(t, err)
			return done.Status == classifier.StatusCompleted
		}, dbtest.Patience(), 20*time.Millisecond)
		rows := listRows(t, b.db.Pool, done)
		require.Equal(t, classifier.SourceCache, rows[2].Result.Source, "held.com: the job's answer")
		require.Equal(t, "Sells held.com.", rows[2].Result.Reasoning)
		for _, d := range []string{"a.com", "held.com", "b.com"} {
			require.Equal(t, 1, b.llm.Calls(d), d)
		}
		var claims int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM domain_claim`).Scan(&claims))
		require.Zero(t, claims)
	})
}
