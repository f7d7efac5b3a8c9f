package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
)

// downDB is a pool pointed at a loopback port where nothing listens:
// Postgres is down.
func downDB(t *testing.T) *db.DB {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	down, err := db.Open(context.Background(), db.Config{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable", port)})
	require.NoError(t, err)
	t.Cleanup(down.Close)
	return down
}
