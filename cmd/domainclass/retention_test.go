package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
)

// LIST_RETENTION and CALLER_MAX_STORED_ROWS are read, defaulted and
// checked like the other settings: a list must outlive its River jobs, as
// a job must.
func TestLoadConfig_Retention(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil)
	require.NoError(t, err)
	require.Equal(t, jobs.DefaultListRetention, cfg.Queue.ListRetention)
	require.Equal(t, httpapi.DefaultCallerMaxStoredRows, cfg.Callers.MaxStoredRows)

	cfg, err = LoadConfig([]string{"LIST_RETENTION=240h", "CALLER_MAX_STORED_ROWS=2000000"})
	require.NoError(t, err)
	require.Equal(t, 240*time.Hour, cfg.Queue.ListRetention)
	require.Equal(t, 2_000_000, cfg.Callers.MaxStoredRows)

	_, err = LoadConfig([]string{"LIST_RETENTION=24h"})
	require.ErrorContains(t, err, "LIST_RETENTION (24h0m0s) must be at least the 168h0m0s a given-up River job is kept")
	_, err = LoadConfig([]string{"CALLER_MAX_STORED_ROWS=0"})
	require.ErrorContains(t, err, "CALLER_MAX_STORED_ROWS")
}
