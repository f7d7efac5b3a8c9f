package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
)

// envWarnings is what a process started with cfg logs about its
// environment's names, as it starts.
func envWarnings(cfg Config) string {
	var log bytes.Buffer
	cfg.warnEnv(slog.New(slog.NewTextHandler(&log, nil)))
	return log.String()
}

// TestConfig_RenamedVariable: a merged variable's old name still sets its
// setting for one release, and the process says once, as it starts, which
// name replaces it; the new name wins when both are set, and a bad value
// under the old name is an error that names it.
func TestConfig_RenamedVariable(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"LIST_UPLOAD_MIN_RATE=1000"})
	require.NoError(t, err)
	require.Equal(t, int64(1000), cfg.Lists.UploadMinRate, "the old name is read")
	require.Equal(t, int64(1000), cfg.Lists.DownloadMinRate, "one rate for uploads and downloads")
	log := envWarnings(cfg)
	require.Equal(t, 1, strings.Count(log, "level=WARN"), log)
	require.Contains(t, log, "LIST_UPLOAD_MIN_RATE is renamed LIST_MIN_RATE")

	cfg, err = LoadConfig([]string{"CALLBACK_ALLOW_PRIVATE=true"})
	require.NoError(t, err)
	require.True(t, cfg.CallbackAllowPrivate)
	require.False(t, cfg.SearchAllowPrivate, "callbacks to a private network do not open it to the domains' owners")
	require.NotContains(t, envWarnings(cfg), "CALLBACK_ALLOW_PRIVATE", "DESIGN.md's name, kept")

	cfg, err = LoadConfig([]string{"LIST_DOWNLOAD_RATE_WINDOW=5s", "LIST_RATE_WINDOW=90s"})
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.Lists.DownloadRateWindow, "the new name wins")
	require.Equal(t, 90*time.Second, cfg.Lists.UploadRateWindow)
	require.Contains(t, envWarnings(cfg), "LIST_DOWNLOAD_RATE_WINDOW is renamed LIST_RATE_WINDOW, which is also set and wins")

	cfg, err = LoadConfig([]string{"LIST_RATE_WINDOW=90s"})
	require.NoError(t, err)
	require.Empty(t, envWarnings(cfg), "the new name alone: nothing to say")

	cfg, err = LoadConfig(nil)
	require.NoError(t, err)
	require.Equal(t, int64(httpapi.DefaultListMinRate), cfg.Lists.UploadMinRate)
	require.Equal(t, httpapi.DefaultListRateWindow, cfg.Lists.DownloadRateWindow)
	require.Empty(t, envWarnings(cfg))

	_, err = LoadConfig([]string{"LIST_UPLOAD_RATE_WINDOW=soon"})
	require.ErrorContains(t, err, "invalid LIST_UPLOAD_RATE_WINDOW")
	_, err = LoadConfig([]string{"LIST_MIN_RATE=0"})
	require.ErrorContains(t, err, "LIST_MIN_RATE must be at least 1")
}

// TestConfig_RemovedVariable: a variable no longer read keeps its reviewed
// value whatever the environment says, and a process given it says once,
// as it starts, that it is ignored and what replaces it.
func TestConfig_RemovedVariable(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"MAX_SNOOZE=1s", "LIST_CHUNK_BUDGET=30s", "API_DB_MAX_CONNS=5"})
	require.NoError(t, err)
	require.Equal(t, jobs.DefaultMaxSnooze, cfg.Queue.MaxSnooze)
	require.Equal(t, jobs.DefaultListChunkRunTime, cfg.Queue.ListChunkRunTime)
	require.Equal(t, cfg.poolSizes().API(), DefaultConfig().poolSizes().API())
	log := envWarnings(cfg)
	require.Equal(t, 3, strings.Count(log, "level=WARN"), log)
	require.Contains(t, log, "MAX_SNOOZE is no longer read, and its value is ignored: a reviewed constant (jobs.DefaultMaxSnooze)")
	require.Contains(t, log, "API_DB_MAX_CONNS is no longer read, and its value is ignored: DB_MAX_CONNS sizes each role's pool")
}

// TestConfig_Count: the environment table stays small (issue 38: at most
// 65 variables), and no name is both read and listed as removed or renamed.
func TestConfig_Count(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	vars := envTable(&cfg)
	require.LessOrEqual(t, len(vars), 65, "each variable kept needs a reason; a tuning is a reviewed constant")
	read := map[string]bool{}
	for _, v := range vars {
		require.False(t, read[v.Name], "%s twice in the table", v.Name)
		read[v.Name] = true
	}
	for _, r := range removedEnv {
		require.False(t, read[r.Name], "%s is listed as removed but still read", r.Name)
	}
	for _, r := range renamedEnv {
		require.False(t, read[r.Old], "%s is listed as renamed but still read under its own row", r.Old)
		require.True(t, read[r.New], "%s replaces %s but is not read", r.New, r.Old)
	}
}
