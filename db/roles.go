package db

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// What each process's role may do, table by table: the least that the api
// and the worker use. The owner (who runs migrate) keeps everything else.
// A table missing here is out of reach of both, which is the point for
// goose's bookkeeping and for api_key in the worker.
var (
	apiGrants = map[string]string{
		// Accepting jobs and lists, answering their status and results.
		// UPDATE only of the columns the api's statements set (issue 36):
		// an expired Idempotency-Key replaced, a caller's queued domains
		// counted, a list cancelled or retried (its state, its counters
		// and the chunk to feed next; not its caller, callback, retention
		// or rows), a row's status made PENDING again by a retry (the table
		// clears its failed answer: the api never writes an answer).
		"classify_job":        "SELECT, INSERT",
		"classify_job_domain": "SELECT",
		"idempotency_key":     "SELECT, INSERT, UPDATE (fingerprint, job_id, list_id, response, created_at)",
		"caller_queue":        "SELECT, INSERT, UPDATE (domains)",
		"list":                "SELECT, INSERT, UPDATE (status, error, completed_at, next_chunk, retries, done, failed)",
		"list_row":            "SELECT, INSERT, UPDATE (status)",
		// Reading answers (a list's estimate, overrides), never writing
		// them: answers are the workers'. Overrides are the operators'
		// (CLI), and the reviewers' (issue 39): a verdict on /review sets
		// one, with its provenance, and an undo restores or deletes it.
		"result":     "SELECT",
		"provenance": "SELECT, INSERT",
		// A retry names the provenance its FAILED rows let go of.
		"provenance_candidate": "INSERT",
		"override":             "SELECT, INSERT, UPDATE, DELETE",
		// Review (issue 39): the rules are read (the CLI sets them); a
		// dispute queues an answer (INSERT, or its reasons on conflict),
		// a verdict, a skip and an undo change an item's review, never
		// what answer it holds.
		"review_rule": "SELECT",
		"review_item": "SELECT, INSERT, UPDATE (reasons, state, skipped_at, verdict, note, reviewer, reviewed_at, " +
			"override_provenance_id, previous_override, previous_provenance_id, last_action, last_actor, last_action_at)",
		"review_dispute": "SELECT, INSERT",
		// GET /domains/changes. Changes are written by the triggers of
		// result and override, as the owner (00019): no role inserts one.
		"answer_change": "SELECT",
		// Authentication, and its last_used_at: that column only, so that
		// the api cannot lift a revocation, a limit or change a hash (the
		// CLI does those, as the owner).
		"api_key": "SELECT, UPDATE (last_used_at)",
		// A caller's model budget and what it spent today: GET /callers/me,
		// a list's check against what is left, metrics. The workers count.
		"caller_budget": "SELECT",
		"caller_spend":  "SELECT",
		// A list's status says when no worker process is alive.
		"worker_process": "SELECT",
		// River: inserting jobs; River UI reads them and cancels or retries
		// them, and pauses queues. Not DELETE: a job is never deleted from
		// the web. UPDATE only of what River's statements for those set
		// (riverpgxv5: JobInsertFastMany's ON CONFLICT sets kind, JobCancel
		// and JobRetry a job's state, schedule, attempts and metadata;
		// QueuePause, QueueResume and QueueUpdate): never a job's args.
		"river_job":          "SELECT, INSERT, UPDATE (kind, state, finalized_at, metadata, max_attempts, scheduled_at)",
		"river_queue":        "SELECT, INSERT, UPDATE (paused_at, updated_at, metadata)",
		"river_leader":       "SELECT",
		"river_migration":    "SELECT",
		"river_notification": "SELECT, INSERT", // River's insert announces jobs through it
	}
	workerGrants = map[string]string{
		"classify_job":        "SELECT, UPDATE, DELETE", // DELETE: JOB_RETENTION's purge
		"classify_job_domain": "SELECT, INSERT",
		"idempotency_key":     "SELECT, DELETE", // the purge of expired keys
		"caller_queue":        "SELECT, UPDATE",
		// DELETE on lists, their rows and batch requests, and provenance:
		// LIST_RETENTION's purge (a list's keys and batches go with it, by
		// cascade). Provenance is written once per answer, never changed.
		"list":                 "SELECT, UPDATE, DELETE",
		"list_row":             "SELECT, UPDATE, DELETE",
		"list_purge":           "SELECT, INSERT, UPDATE, DELETE",
		"llm_batch":            "SELECT, INSERT, UPDATE",
		"llm_batch_item":       "SELECT, INSERT, DELETE",
		"result":               "SELECT, INSERT, UPDATE",
		"provenance":           "SELECT, INSERT, DELETE",
		"provenance_candidate": "SELECT, INSERT, DELETE", // INSERT: also by the trigger of a result's upsert
		"domain_claim":         "SELECT, INSERT, UPDATE, DELETE",
		"override":             "SELECT",
		// The fan-out publishes changes (their seq) and tells their
		// recipients; the changes themselves are the triggers'.
		"answer_change": "SELECT, UPDATE (seq)",
		// Who was told of which change (the fan-out's); the purges of jobs
		// and lists delete theirs by cascade.
		"answer_change_notice": "SELECT, INSERT",
		// The provenance purge asks whether a review item refers to a row;
		// the queue is filled by triggers that run as the owner.
		"review_item": "SELECT",
		// The deployment's model budget (leases, the provider's throttles)
		// and the callers' budgets, which only the operators set (CLI).
		"llm_account":   "SELECT, INSERT, UPDATE",
		"llm_lease":     "SELECT, INSERT, UPDATE, DELETE",
		"caller_budget": "SELECT",
		"caller_spend":  "SELECT, INSERT, UPDATE",
		// Each worker process's lease, and the hand-back of a dead one's
		// jobs (ProcessRescue).
		"worker_process": "SELECT, INSERT, UPDATE, DELETE",
		// River's client: fetching, completing, rescuing, cleaning,
		// electing a leader.
		"river_job":          "SELECT, INSERT, UPDATE, DELETE",
		"river_queue":        "SELECT, INSERT, UPDATE, DELETE",
		"river_leader":       "SELECT, INSERT, UPDATE, DELETE",
		"river_migration":    "SELECT",
		"river_notification": "SELECT, INSERT, DELETE",
	}
	sequences = []string{"river_job_id_seq", "river_notification_id_seq"}
)

// Roles names the login roles the api and the worker processes use.
type Roles struct {
	API, Worker string
}

// GrantRoles creates the api and worker roles when they do not exist
// (LOGIN, no password: set one, or use your own authentication) and grants
// each exactly what it uses in schema (the pool's search_path when ""). It
// is safe to run again, and must be, after a migration that adds a table.
// Run it as the tables' owner.
func GrantRoles(ctx context.Context, exec DBTX, schema string, r Roles) error {
	if r.API == "" || r.Worker == "" || r.API == r.Worker {
		return fmt.Errorf("the api and worker roles need two different names, got %q and %q", r.API, r.Worker)
	}
	if schema == "" {
		if err := exec.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return translate(err)
		}
	}
	qs := pgx.Identifier{schema}.Sanitize()
	var stmts []string
	for _, role := range []string{r.API, r.Worker} {
		q := pgx.Identifier{role}.Sanitize()
		var exists bool
		if err := exec.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
			return translate(err)
		}
		if !exists {
			stmts = append(stmts, "CREATE ROLE "+q+" LOGIN")
		}
		// Start from nothing, so that a grant removed here is removed there.
		stmts = append(stmts, "GRANT USAGE ON SCHEMA "+qs+" TO "+q,
			"REVOKE ALL ON ALL TABLES IN SCHEMA "+qs+" FROM "+q,
			"REVOKE ALL ON ALL SEQUENCES IN SCHEMA "+qs+" FROM "+q)
	}
	for role, grants := range map[string]map[string]string{r.API: apiGrants, r.Worker: workerGrants} {
		q := pgx.Identifier{role}.Sanitize()
		for table, privileges := range grants {
			ok, err := exists(ctx, exec, schema, table)
			if err != nil {
				return err
			}
			if !ok && strings.HasPrefix(table, "river_") {
				continue // not in this River version's schema
			} else if !ok {
				return fmt.Errorf("table %s.%s does not exist: run migrate first", schema, table)
			}
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s.%s TO %s", privileges, qs, pgx.Identifier{table}.Sanitize(), q))
		}
		for _, seq := range sequences {
			if ok, err := exists(ctx, exec, schema, seq); err != nil {
				return err
			} else if ok {
				stmts = append(stmts, fmt.Sprintf("GRANT USAGE, SELECT ON SEQUENCE %s.%s TO %s", qs, pgx.Identifier{seq}.Sanitize(), q))
			}
		}
	}
	for _, s := range stmts {
		if _, err := exec.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", strings.SplitN(s, " TO ", 2)[0], translate(err))
		}
	}
	return nil
}

func exists(ctx context.Context, exec DBTX, schema, name string) (bool, error) {
	var ok bool
	err := exec.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, name}.Sanitize()).Scan(&ok)
	return ok, translate(err)
}
