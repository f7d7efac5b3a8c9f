package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/jobs"
	"github.com/domainclass/domainclass/wire"
)

// TestLeastPrivilegeRoles runs the api and the worker as the roles that
// `domainclass roles` creates: a job with a webhook, a list and a cancel,
// and River UI all work, and each role is refused what it must not do.
func TestLeastPrivilegeRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	apiRole, workerRole := "dc_api_"+suffix, "dc_worker_"+suffix
	// Registered first, so that it runs last: once the processes are gone.
	owner, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range []string{apiRole, workerRole} {
			_, _ = owner.Exec(context.Background(), "DROP OWNED BY "+pgx.Identifier{r}.Sanitize())
			_, _ = owner.Exec(context.Background(), "DROP ROLE "+pgx.Identifier{r}.Sanitize())
		}
		owner.Close(context.Background())
	})
	rc := newHookReceiver(t)
	e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
		if r.Domain == "flaky.com" && r.Call == 1 {
			return llmtest.Reply{Content: "Sure!"} // unreadable: its row FAILS, for the retry below
		}
		return llmtest.Answer(true, 5, "Makes snacks.")
	},
		map[string]string{"WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true"})

	code, out, errOut := e.cli(ctx, "", nil, "roles", "--api", apiRole, "--worker", workerRole)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, apiRole)
	code, _, errOut = e.cli(ctx, "", nil, "roles", "--api", apiRole, "--worker", workerRole)
	require.Equal(t, 0, code, "again: %s", errOut)

	as := func(role string) string {
		u, err := url.Parse(dbtest.URL())
		require.NoError(t, err)
		u.User = url.User(role)
		return u.String()
	}
	e.env["DATABASE_URL"] = as(apiRole)
	api := e.start(cli.RoleAPI)
	e.env["DATABASE_URL"] = as(workerRole)
	e.start(cli.RoleWorker)
	e.env["DATABASE_URL"] = dbtest.URL()

	// A job with a webhook.
	status, body := e.post(`{"domains": ["acme.com", "beta.com"]}`, "X-Callback-URL", rc.srv.URL+"/hooks")
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var job jobView
	require.NoError(t, json.Unmarshal(body, &job))
	e.wait(job.JobID, "COMPLETED", dbtest.Patience())
	require.Eventually(t, func() bool { return len(rc.forJob(job.JobID)) == 1 }, dbtest.Patience(), 10*time.Millisecond)

	// A list to its end, and another cancelled.
	client := []string{"DOMAINCLASS_URL=" + api.APIURL()}
	code, _, errOut = e.cli(ctx, "", client, "submit", "--list", "--wait", "--poll", "100ms", "gamma.com", "acme.com")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = e.cli(ctx, "", client, "submit", "--list", "delta.com")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = e.cli(ctx, "", client, "lists", "cancel", listIDOf(t, errOut))
	require.Equal(t, 0, code, errOut)
	// A list with a FAILED row, retried (the api role makes the row
	// PENDING again) and waited for again.
	code, _, errOut = e.cli(ctx, "", client, "submit", "--list", "--wait", "--poll", "100ms", "flaky.com")
	require.Equal(t, 3, code, "ended with a row FAILED: %s", errOut)
	flaky := listIDOf(t, errOut)
	code, _, errOut = e.cli(ctx, "", client, "lists", "retry", flaky)
	require.Equal(t, 0, code, errOut)
	code, _, errOut = e.cli(ctx, "", client, "lists", "wait", "--poll", "100ms", flaky)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "1 completed, 0 failed")

	// River UI reads what the api role may read.
	resp, err := http.Get(api.APIURL() + "/riverui/api/jobs?state=completed")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// And changes what River UI changes, through the api's own River
	// client and pool (rolled back): a job cancelled and retried, a queue
	// paused, resumed and its settings changed.
	riverTx, err := api.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer riverTx.Rollback(ctx)
	inserted, err := api.River.InsertTx(ctx, riverTx, jobs.ClassifyArgs{JobID: uuid.NewString()},
		&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	riverJob, err := api.River.JobCancelTx(ctx, riverTx, inserted.Job.ID)
	require.NoError(t, err, "River UI cancels a job as the api role")
	require.Equal(t, rivertype.JobStateCancelled, riverJob.State)
	riverJob, err = api.River.JobRetryTx(ctx, riverTx, inserted.Job.ID)
	require.NoError(t, err, "River UI retries a job as the api role")
	require.Equal(t, rivertype.JobStateAvailable, riverJob.State)
	require.NoError(t, api.River.QueuePauseTx(ctx, riverTx, jobs.QueueWebhook, nil))
	require.NoError(t, api.River.QueueResumeTx(ctx, riverTx, jobs.QueueWebhook, nil))
	_, err = api.River.QueueUpdateTx(ctx, riverTx, jobs.QueueWebhook, &river.QueueUpdateParams{Metadata: []byte(`{"by":"test"}`)})
	require.NoError(t, err)
	require.NoError(t, riverTx.Rollback(ctx))

	// Review (issue 39) as the api role: a caller's dispute queues an
	// answer the worker role stored, a verdict sets an override, an undo
	// deletes it again.
	status, body = e.operatorCall("", "POST", "/domains/acme.com/disputes", `{"note": "Not a maker."}`)
	require.Equal(t, http.StatusCreated, status, "%s", body)
	e.verdict("", e.reviewNext("").Item.ID, "no")
	status, body = e.operatorCall("", "POST", "/review/undo", "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = e.operatorCall("", "GET", "/review/stats", "")
	require.Equal(t, http.StatusOK, status, "%s", body)

	// And each role is refused the rest.
	refused := func(role, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, as(role))
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, fmt.Sprintf("SET search_path = %s", pgx.Identifier{e.schema}.Sanitize()))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s as %s: want permission denied, got %v", sql, role, err)
		require.Equal(t, "42501", pgErr.Code, "%s as %s: %s", sql, role, pgErr.Message)
	}
	// The worker purges what has expired: the lists, their rows, their
	// provenance (the hourly purge ran at start; this is the same run).
	ownerDB, err := db.Open(ctx, db.Config{URL: dbtest.URL(), Schema: e.schema, MaxConns: 2})
	require.NoError(t, err)
	defer ownerDB.Close()
	_, err = ownerDB.Pool.Exec(ctx, `UPDATE list SET completed_at = completed_at - retention - interval '1 hour'`)
	require.NoError(t, err)
	// The answers move on (as a refresh would), so that only the lists'
	// rows refer to gamma.com's provenance.
	_, err = ownerDB.Pool.Exec(ctx, `UPDATE result SET provenance_id = NULL`)
	require.NoError(t, err)
	workerDB, err := db.Open(ctx, db.Config{URL: as(workerRole), Schema: e.schema, MaxConns: 2})
	require.NoError(t, err)
	defer workerDB.Close()
	purged, err := (&jobs.PurgeWorker{DB: workerDB.Pool, Logger: slog.New(slog.DiscardHandler),
		JobRetention: jobs.DefaultJobRetention}).Purge(ctx)
	require.NoError(t, err, "the worker role may purge")
	require.EqualValues(t, 3, purged.Lists, "the list answered, the one cancelled, the one retried")
	require.EqualValues(t, 4, purged.ListRows)
	require.NotZero(t, purged.Provenance, "gamma.com's, which nothing refers to any more")

	// A refresh made as the worker role is recorded (the trigger writes
	// as the owner), published by the worker's fan-out, and read by the
	// api's GET /domains/changes; neither role writes a change itself
	// (issue 39).
	_, err = workerDB.Pool.Exec(ctx, `UPDATE result SET answer = NOT answer, provenance_id = NULL WHERE domain = 'acme.com'`)
	require.NoError(t, err, "the worker role refreshes an answer")
	require.Eventually(t, func() bool {
		resp, err := http.Get(api.APIURL() + "/domains/changes")
		require.NoError(t, err)
		defer resp.Body.Close()
		var page wire.AnswerChanges
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		// The review's verdict and its undo above are changes too.
		var causes []string
		for _, c := range page.Changes {
			if c.Domain == "acme.com" {
				causes = append(causes, c.Cause)
			}
		}
		return slices.Equal(causes, []string{"review", "review", "refresh"})
	}, dbtest.Patience(), 20*time.Millisecond, "the change published by the worker role and listed by the api role")
	for _, role := range []string{apiRole, workerRole} {
		refused(role, `INSERT INTO answer_change (classifier, domain, cause) VALUES ('cpg', 'forged.com', 'review')`)
		refused(role, `UPDATE answer_change SET new_answer = true`)
		refused(role, `DELETE FROM answer_change`)
	}
	refused(apiRole, `UPDATE answer_change SET seq = NULL`)

	refused(apiRole, `UPDATE result SET reasoning = 'forged'`)
	refused(apiRole, `DELETE FROM list`)
	refused(apiRole, `DELETE FROM list_row`)
	refused(apiRole, `DELETE FROM provenance`)
	refused(apiRole, `SELECT FROM list_purge`)
	refused(apiRole, `SELECT FROM provenance_candidate`)
	refused(workerRole, `UPDATE provenance SET model = 'forged'`)
	refused(apiRole, `DELETE FROM river_job`)
	refused(apiRole, `DELETE FROM classify_job`)
	refused(workerRole, `DELETE FROM override`) // overrides are the operators' (the CLI, as the owner) and the reviewers' (the api)
	// The api records a review, never what answer is under review; the
	// rules are the operators' (the CLI); the worker fills the queue only
	// through the table's trigger, which runs as the owner.
	refused(apiRole, `UPDATE review_item SET answer = false`)
	refused(apiRole, `UPDATE review_item SET provenance_id = NULL`)
	refused(apiRole, `DELETE FROM review_item`)
	refused(apiRole, `UPDATE review_rule SET audit_rate = 1`)
	refused(apiRole, `DELETE FROM review_dispute`)
	refused(workerRole, `INSERT INTO review_item (classifier, domain, provenance_id, reasons, answer, confidence, answered_at, source) SELECT 'cpg', 'x.com', gen_random_uuid(), '{audit}', true, 5, now(), 'llm'`)
	refused(workerRole, `SELECT FROM review_dispute`)
	refused(workerRole, `SELECT key_hash FROM api_key`)
	// The api changes a list's state and counters (a cancel, a retry), a
	// row's status (a retry queues FAILED rows again; the table clears their
	// failed answer) and River jobs' state: never whose a list is, where its
	// webhook goes, how long it is kept or what it holds, an answer, or a
	// River job's args (issue 36).
	refused(apiRole, `UPDATE list SET caller = 'forged'`)
	refused(apiRole, `UPDATE list SET callback_url = 'https://evil.example/hook'`)
	refused(apiRole, `UPDATE list SET retention = interval '100 years'`)
	refused(apiRole, `UPDATE list SET rows = 1`)
	refused(apiRole, `UPDATE list_row SET answer = true`)
	refused(apiRole, `UPDATE list_row SET reasoning = 'forged'`)
	refused(apiRole, `UPDATE list_row SET error = 'forged'`)
	refused(apiRole, `UPDATE list_row SET input = 'forged.com'`)
	refused(apiRole, `UPDATE river_job SET args = '{}'`)
	refused(apiRole, `UPDATE river_job SET attempt = 0`)
	refused(apiRole, `UPDATE caller_queue SET caller = 'forged'`)
	refused(apiRole, `UPDATE idempotency_key SET caller = 'forged'`)
	// The api writes one column of api_key, when a key was last used: not
	// its revocation, its limits or its hash.
	refused(apiRole, `UPDATE api_key SET revoked_at = NULL`)
	refused(apiRole, `UPDATE api_key SET rate_per_minute = 1000000`)
	refused(apiRole, `UPDATE api_key SET key_hash = 'forged'`)
	refused(apiRole, `INSERT INTO api_key (name, key_hash, key_prefix) VALUES ('x', 'y', 'z')`)
	conn, err := pgx.Connect(ctx, as(apiRole))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf("SET search_path = %s", pgx.Identifier{e.schema}.Sanitize()))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE api_key SET last_used_at = now() WHERE name = 'nobody'`)
	require.NoError(t, err, "what authentication writes")
	refused(workerRole, `INSERT INTO classify_job (id, caller, classifier, inputs, domains) VALUES (gen_random_uuid(), 'x', 'cpg', '{}', '{}')`)
	// Budgets are the operators' (the CLI); the api reads what was spent.
	refused(workerRole, `UPDATE caller_budget SET model_calls_per_day = 1000000`)
	refused(apiRole, `UPDATE caller_spend SET model_calls = 0`)
	refused(apiRole, `DELETE FROM llm_lease`)
	var leases int
	require.NoError(t, owner.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.llm_lease`, pgx.Identifier{e.schema}.Sanitize())).Scan(&leases))
	require.Positive(t, leases, "the worker renews its lease on the model budget as its own role")
}
