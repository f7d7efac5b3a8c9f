package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/jobs"
)

// TestConfig_RenamedVariable: a renamed variable's old name still sets its
// setting for one release, and the process says once, as it starts, which
// name replaces it; the new name wins when both are set, and a bad value
// under the old name is an error that names it.
func TestConfig_RenamedVariable(t *testing.T) {
	t.Parallel()
	warnings := func(cfg Config) string {
		var log bytes.Buffer
		cfg.warnRenamed(slog.New(slog.NewTextHandler(&log, nil)))
		return log.String()
	}

	cfg, err := LoadConfig([]string{"LIST_CHUNK_BUDGET=30s"})
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, cfg.Queue.ListChunkRunTime, "the old name is read")
	log := warnings(cfg)
	require.Equal(t, 1, strings.Count(log, "level=WARN"), log)
	require.Contains(t, log, "LIST_CHUNK_BUDGET is renamed LIST_CHUNK_RUN_TIME")

	cfg, err = LoadConfig([]string{"LIST_CHUNK_BUDGET=30s", "LIST_CHUNK_RUN_TIME=90s"})
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.Queue.ListChunkRunTime, "the new name wins")
	require.Contains(t, warnings(cfg), "LIST_CHUNK_BUDGET is renamed LIST_CHUNK_RUN_TIME")

	cfg, err = LoadConfig([]string{"LIST_CHUNK_RUN_TIME=90s"})
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.Queue.ListChunkRunTime)
	require.Empty(t, warnings(cfg), "the new name alone: nothing to say")

	cfg, err = LoadConfig(nil)
	require.NoError(t, err)
	require.Equal(t, jobs.DefaultListChunkRunTime, cfg.Queue.ListChunkRunTime)
	require.Empty(t, warnings(cfg))

	_, err = LoadConfig([]string{"LIST_CHUNK_BUDGET=soon"})
	require.ErrorContains(t, err, "invalid LIST_CHUNK_BUDGET")
}
