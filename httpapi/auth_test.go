package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/internal/apikey"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()

	t.Run("EveryProtectedRouteRefusesBadKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		revoked := createKey(t, b.db, "gone", db.APIKey{})
		require.NoError(t, db.APIKeyRevoke(context.Background(), b.db.Pool, "gone"))
		unknown, _ := apikey.New()

		routes := []struct{ method, path, body string }{
			{"POST", "/domains/classify", `{"domains": ["acme.com"]}`},
			{"GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", ""},
		}
		for _, auth := range []struct{ name, header, detail string }{
			{"Missing", "", `Send your API key as "Authorization: Bearer <key>".`},
			{"NotBearer", "Basic " + b.keyA, `The Authorization header is malformed: it must be "Bearer dc_…".`},
			{"Malformed", "Bearer sk-live-123", `The Authorization header is malformed: it must be "Bearer dc_…".`},
			{"Truncated", "Bearer " + b.keyA[:20], `The Authorization header is malformed: it must be "Bearer dc_…".`},
			{"Unknown", "Bearer " + unknown, "The API key is not valid (unknown or revoked)."},
			{"Revoked", "Bearer " + revoked, "The API key is not valid (unknown or revoked)."},
		} {
			for _, route := range routes {
				r := b.do(t, route.method, route.path, route.body, "Authorization", auth.header)
				p := requireProblem(t, r, http.StatusUnauthorized, "unauthorized")
				require.Equal(t, auth.detail, p.Detail, "%s %s", auth.name, route.path)
				require.Equal(t, `Bearer realm="domainclass"`, r.header.Get("WWW-Authenticate"))
				require.NotContains(t, string(r.body), b.keyA, "a key never appears in a response")
			}
		}
		require.Equal(t, nothing, b.counts(t))

		ok := b.do(t, "POST", "/domains/classify", `{"domains": ["acme.com"]}`, "Authorization", "bearer "+b.keyA)
		require.Equal(t, http.StatusAccepted, ok.status, "the scheme is case-insensitive")
	})

	t.Run("RevocationTakesEffectWithinTheCacheTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{authTTL: 100 * time.Millisecond})
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`).status)
		require.NoError(t, db.APIKeyRevoke(context.Background(), b.db.Pool, "team-a"))
		require.Eventually(t, func() bool {
			return b.do(t, "GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", "").status == http.StatusUnauthorized
		}, dbtest.Patience(), 20*time.Millisecond)
	})

	t.Run("LastUseIsRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		b.do(t, "GET", "/domains/classify/0192f2c4-9a8e-7d3c-b2a1-1234567890ab", "")
		require.Eventually(t, func() bool {
			keys, err := db.APIKeyList(context.Background(), b.db.Pool)
			require.NoError(t, err)
			return keys[0].Name == "team-a" && keys[0].LastUsedAt != nil && keys[1].LastUsedAt == nil
		}, dbtest.Patience(), 20*time.Millisecond)
	})
}

func TestCallerLimits(t *testing.T) {
	t.Parallel()

	t.Run("RateLimitThenAcceptedAfterRetryAfter", func(t *testing.T) {
		t.Parallel()
		// The rate counts in a clock that stands still until the test
		// moves it: however slowly this machine sends the 61 requests, no
		// token comes back meanwhile.
		clock := newTestClock()
		b := setup(t, setupOpts{clock: clock})
		key := createKey(t, b.db, "bursty", db.APIKey{RatePerMinute: 60}) // one a second, a minute's worth at once
		for i := range 60 {
			r := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key)
			require.Equal(t, http.StatusAccepted, r.status, "request %d", i)
		}
		before := b.counts(t)
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key)
		p := requireProblem(t, r, http.StatusTooManyRequests, "rate-limited")
		require.Equal(t, "You may send 60 jobs a minute; retry after the number of seconds in Retry-After.", p.Detail)
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Equal(t, before, b.counts(t), "nothing written on a 429")

		other := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`)
		require.Equal(t, http.StatusAccepted, other.status, "another caller is not limited by this one")

		clock.Advance(999 * time.Millisecond)
		requireProblem(t, b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key),
			http.StatusTooManyRequests, "rate-limited")
		clock.Advance(time.Millisecond)
		require.Equal(t, http.StatusAccepted,
			b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key).status,
			"accepted again once Retry-After has passed")
	})

	t.Run("RefusedJobsGiveTheirTokenBack", func(t *testing.T) {
		t.Parallel()
		// Two jobs a minute, on a clock that moves a microsecond each time
		// it is read (a request takes time; two jobs a minute refill a
		// token in 30 s): a job refused after the rate check (here for its
		// queued domains) must not use up one of them, or the next valid
		// job is refused as rate-limited.
		clock := newTestClock()
		clock.step = time.Microsecond
		b := setup(t, setupOpts{clock: clock})
		key := createKey(t, b.db, "refused", db.APIKey{RatePerMinute: 2, MaxQueuedDomains: 5})
		ctx := context.Background()
		_, err := b.db.Pool.Exec(ctx, `INSERT INTO caller_queue (caller, domains) VALUES ('refused', 5)`)
		require.NoError(t, err)
		for range 2 {
			requireProblem(t, b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key),
				http.StatusTooManyRequests, "too-many-queued")
		}
		_, err = b.db.Pool.Exec(ctx, `UPDATE caller_queue SET domains = 0 WHERE caller = 'refused'`)
		require.NoError(t, err)
		for i := range 2 {
			r := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key)
			require.Equal(t, http.StatusAccepted, r.status, "job %d after two refusals: %s", i, r.body)
		}
		requireProblem(t, b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key),
			http.StatusTooManyRequests, "rate-limited")
	})

	t.Run("JobLargerThanTheQueueLimitIsNotRetryable", func(t *testing.T) {
		t.Parallel()
		// A 429 with Retry-After for a job that no wait can make fit sends
		// a client that obeys it round forever.
		b := setup(t, setupOpts{})
		key := createKey(t, b.db, "small", db.APIKey{RatePerMinute: 1, MaxQueuedDomains: 2})
		before := b.counts(t)
		r := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com", "b.com", "c.com"]}`, "Authorization", "Bearer "+key)
		p := requireProblem(t, r, http.StatusUnprocessableEntity, "job-exceeds-queue-limit")
		require.Contains(t, p.Detail, "The job has 3 distinct domains; your key may have at most 2 domains queued at once")
		require.Empty(t, r.header.Get("Retry-After"))
		require.Equal(t, before, b.counts(t))
		require.Equal(t, http.StatusAccepted,
			b.do(t, "POST", "/domains/classify", `{"domains": ["a.com", "b.com"]}`, "Authorization", "Bearer "+key).status,
			"a job that fits is accepted, and the refused one took none of the caller's one job a minute")
	})

	t.Run("ListLargerThanTheWholeBudgetIsNotRetryable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ctx := context.Background()
		require.NoError(t, db.CallerBudgetSet(ctx, b.db.Pool, "team-a", db.CallerBudget{ModelCallsPerDay: 2}))
		_, ok, err := db.CallerSpendReserve(ctx, b.db.Pool, "team-a", 0)
		require.NoError(t, err)
		require.True(t, ok)
		upload := func(body string) response {
			return b.do(t, "POST", "/lists", body, "Content-Type", "text/plain")
		}
		r := upload("a.com\nb.com\n")
		requireProblem(t, r, http.StatusTooManyRequests, "budget-exceeded")
		require.NotEmpty(t, r.header.Get("Retry-After"), "two calls fit tomorrow's budget")
		r = upload("a.com\nb.com\nc.com\n")
		p := requireProblem(t, r, http.StatusUnprocessableEntity, "list-exceeds-budget")
		require.Contains(t, p.Detail, "This list needs an estimated 3 model calls; your daily model budget is 2 model calls in all")
		require.Empty(t, r.header.Get("Retry-After"), "no day's budget holds it: waiting is no use")
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/lists?budget=partial", "a.com\nb.com\nc.com\n",
			"Content-Type", "text/plain").status, "budget=partial runs it up to the budget")
	})

	t.Run("ListOverTheBudgetRunsPartlyByItsNameOrTheDeprecatedOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{limits: httpapi.CallerLimits{MaxActiveLists: 1000}})
		ctx := context.Background()
		require.NoError(t, db.CallerBudgetSet(ctx, b.db.Pool, "team-a", db.CallerBudget{ModelCallsPerDay: 2}))
		upload := func(query, body string) response {
			return b.do(t, "POST", "/lists"+query, body, "Content-Type", "text/plain")
		}
		p := requireProblem(t, upload("", "a.com\nb.com\nc.com\n"), http.StatusUnprocessableEntity, "list-exceeds-budget")
		require.Contains(t, p.Detail, "Send it with ?over_budget=run_partly to run it up to the budget",
			"the refusal names the parameter to send")
		requireProblem(t, upload("?over_budget=refuse", "a.com\nb.com\nc.com\n"), http.StatusUnprocessableEntity, "list-exceeds-budget")
		r := upload("?over_budget=run_partly", "d.com\ne.com\nf.com\n")
		require.Equal(t, http.StatusAccepted, r.status, "over_budget=run_partly runs it up to the budget")
		require.Empty(t, r.header.Get("Deprecation"))
		r = upload("?budget=partial", "g.com\nh.com\ni.com\n")
		require.Equal(t, http.StatusAccepted, r.status, "the deprecated budget=partial still runs it, one release")
		require.Equal(t, "@1796342400", r.header.Get("Deprecation"), "and says it is deprecated")
		p = requireProblem(t, upload("?over_budget=partial", "a.com\n"), http.StatusBadRequest, "invalid-query")
		require.Contains(t, p.Detail, "over_budget must be refuse or run_partly")
		p = requireProblem(t, upload("?over_budget=refuse&budget=partial", "a.com\n"), http.StatusBadRequest, "invalid-query")
		require.Contains(t, p.Detail, "disagree")
		require.Equal(t, http.StatusAccepted, upload("?over_budget=run_partly&budget=partial", "j.com\nk.com\nl.com\n").status,
			"the two names agreeing is no error")
	})

	t.Run("ReplaysAreNotRateLimited", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		key := createKey(t, b.db, "slow", db.APIKey{RatePerMinute: 1})
		first := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key, "Idempotency-Key", "k")
		require.Equal(t, http.StatusAccepted, first.status)
		again := b.do(t, "POST", "/domains/classify", `{"domains": ["a.com"]}`, "Authorization", "Bearer "+key, "Idempotency-Key", "k")
		require.Equal(t, http.StatusAccepted, again.status)
		require.Equal(t, first.body, again.body)
		requireProblem(t, b.do(t, "POST", "/domains/classify", `{"domains": ["b.com"]}`, "Authorization", "Bearer "+key),
			http.StatusTooManyRequests, "rate-limited")
	})

	t.Run("QueuedDomainsCap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		key := createKey(t, b.db, "big", db.APIKey{MaxQueuedDomains: 15})
		ten := `{"domains": ["a0.com","a1.com","a2.com","a3.com","a4.com","a5.com","a6.com","a7.com","a8.com","a9.com"]}`
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/domains/classify", ten, "Authorization", "Bearer "+key).status)
		before := b.counts(t)
		r := b.do(t, "POST", "/domains/classify", strings.ReplaceAll(ten, `"a`, `"b`), "Authorization", "Bearer "+key)
		p := requireProblem(t, r, http.StatusTooManyRequests, "too-many-queued")
		require.Equal(t, "You have 10 domains queued and not yet answered; the limit is 15. Wait for your jobs to finish, then send more.", p.Detail)
		require.Equal(t, "10", r.header.Get("Retry-After"))
		require.Equal(t, before, b.counts(t))
		five := `{"domains": ["c0.com","c1.com","c2.com","c3.com","c4.com"]}`
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/domains/classify", five, "Authorization", "Bearer "+key).status,
			"up to the cap is fine")
		require.Equal(t, http.StatusAccepted, b.do(t, "POST", "/domains/classify", ten).status, "other callers are not affected")
	})
}
