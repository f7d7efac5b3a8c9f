package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// TestProcessRescue: the River jobs a worker process was running when its
// lease ran out are handed back as River's rescuer would (issue 36), once,
// and nothing of a live process is touched.
func TestProcessRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.TestTx(t)
	_, err := tx.Exec(ctx, `
		INSERT INTO worker_process (id, expires_at) VALUES ('dead', now() - interval '2 seconds'), ('alive', now() + interval '5 seconds');
		INSERT INTO river_job (id, kind, args, queue, state, attempt, max_attempts, attempted_at, attempted_by, metadata) VALUES
		    (1, 'classify', '{"job_id": "j"}', 'classify', 'running', 1, 8, now(), '{alive,dead}', '{}'),
		    (2, 'classify_list', '{"list_id": "0190e3c1-0000-7000-8000-000000000001", "chunk": 3}', 'list', 'running', 8, 8, now(), '{dead}', '{}'),
		    (3, 'classify', '{"job_id": "k"}', 'classify', 'running', 2, 8, now(), '{dead}', '{"cancel_attempted_at": "2026-12-04T00:00:00Z"}'),
		    (4, 'classify', '{"job_id": "l"}', 'classify', 'running', 1, 8, now(), '{dead,alive}', '{}'),
		    (5, 'classify', '{"job_id": "m"}', 'classify', 'available', 1, 8, now(), '{dead}', '{}')`)
	require.NoError(t, err)

	dead, err := db.ProcessRescue(ctx, tx)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "dead", dead[0].ID)
	require.Equal(t, map[string]int{"classify": 2, "classify_list": 1}, dead[0].Jobs)
	require.Equal(t, []string{"0190e3c1-0000-7000-8000-000000000001"}, dead[0].Lists)

	state := func(id int) (string, string) {
		var s, last string
		require.NoError(t, tx.QueryRow(ctx, `SELECT state::text, coalesce(errors[array_upper(errors, 1)]->>'error', '') FROM river_job WHERE id = $1`, id).
			Scan(&s, &last))
		return s, last
	}
	s, why := state(1)
	require.Equal(t, "available", s, "attempts left: it runs again at once")
	require.Regexp(t, `^worker process dead stopped renewing its lease \(expired \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); its job was handed back$`, why)
	s, _ = state(2)
	require.Equal(t, "discarded", s, "its last attempt: given up, as River's rescuer does")
	s, _ = state(3)
	require.Equal(t, "cancelled", s, "a cancel was asked")
	s, why = state(4)
	require.Equal(t, "running", s, "last attempted by a live process")
	require.Empty(t, why)
	s, _ = state(5)
	require.Equal(t, "available", s, "not running: not touched")

	again, err := db.ProcessRescue(ctx, tx)
	require.NoError(t, err)
	require.Empty(t, again, "a dead process is handed back once")

	lapsed, rescued, err := db.ProcessRenew(ctx, tx, "dead", time.Second)
	require.NoError(t, err)
	require.True(t, lapsed)
	require.True(t, rescued, "a process that comes back learns its jobs were handed back")
	lapsed, rescued, err = db.ProcessRenew(ctx, tx, "alive", time.Second)
	require.NoError(t, err)
	require.False(t, lapsed)
	require.False(t, rescued)
}
