package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFirstSteps (issue 36, a new user): what someone trying the binary
// and a deployment for the first time reaches for answers.
func TestFirstSteps(t *testing.T) {
	t.Parallel()

	t.Run("VersionIsTheBinarys", func(t *testing.T) {
		t.Parallel()
		var out, errOut strings.Builder
		code := Run(context.Background(), []string{"--version"}, nil, strings.NewReader(""), &out, &errOut)
		require.Equal(t, 0, code, errOut.String())
		require.True(t, strings.HasPrefix(out.String(), "domainclass "+Version+" ("), out.String())
	})

	t.Run("WorkerHealthAnswersHEAD", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, nil, nil)
		w := e.start(RoleWorker)
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Head(w.WorkerURL() + path)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, path)
			require.Empty(t, body, path)
		}
	})
}
