package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	"riverqueue.com/riverui"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/jobs"
)

func riverUIServer(t *testing.T, user, password string) string {
	t.Helper()
	d := dbtest.New(t)
	client, err := jobs.NewClient(d.Pool, jobs.ClientConfig{Settings: jobs.DefaultSettings(), Schema: d.Schema})
	require.NoError(t, err)
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil), Logger: slog.New(slog.DiscardHandler), Prefix: httpapi.RiverUIPrefix,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, ui.Start(ctx))
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(httpapi.New(httpapi.Config{
		DB: d, River: client, Registry: classifier.DefaultRegistry(), Auth: httpapi.AuthOff{},
		Metrics: httpapi.NewMetrics(reg), MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		RiverUI: ui, RiverUIUser: user, RiverUIPassword: password,
	}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(t *testing.T, url, user, password string) (int, http.Header, string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	if user != "" || password != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func TestRiverUI(t *testing.T) {
	t.Parallel()

	t.Run("RequiresBasicAuth", func(t *testing.T) {
		t.Parallel()
		base := riverUIServer(t, "ops", "s3cret")
		for _, path := range []string{"/riverui/", "/riverui/jobs", "/riverui/api/jobs?state=completed", "/riverui/api/jobs/retry"} {
			status, header, body := get(t, base+path, "", "")
			require.Equal(t, http.StatusUnauthorized, status, path)
			require.Equal(t, `Basic realm="River UI", charset="UTF-8"`, header.Get("WWW-Authenticate"))
			require.NotContains(t, body, "<html", "the UI must not be served without auth")
			status, _, _ = get(t, base+path, "ops", "wrong")
			require.Equal(t, http.StatusUnauthorized, status, path)
			status, _, _ = get(t, base+path, "ops2", "s3cret")
			require.Equal(t, http.StatusUnauthorized, status, path)
		}

		status, _, body := get(t, base+"/riverui/", "ops", "s3cret")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, `"base":"/riverui"`, "River UI must know its prefix")
		status, _, body = get(t, base+"/riverui/api/jobs?state=completed", "ops", "s3cret")
		require.Equal(t, http.StatusOK, status)
		require.True(t, strings.HasPrefix(body, `{"data":`), body)

		status, _, _ = get(t, base+"/riverui/api/health-checks/minimal", "", "")
		require.Equal(t, http.StatusOK, status, "health checks stay open for probes")
		status, header, _ := get(t, base+"/riverui", "", "")
		require.Equal(t, http.StatusMovedPermanently, status)
		require.Equal(t, "/riverui/", header.Get("Location"))
	})

	t.Run("OpenWithoutCredentialsWhenMountedSo", func(t *testing.T) {
		t.Parallel()
		status, _, _ := get(t, riverUIServer(t, "", "")+"/riverui/", "", "")
		require.Equal(t, http.StatusOK, status)
	})

	t.Run("MetricsRouteCountsRequestsByRoute", func(t *testing.T) {
		t.Parallel()
		base := riverUIServer(t, "ops", "s3cret")
		get(t, base+"/riverui/", "", "")
		get(t, base+"/domains/classify/not-a-uuid", "", "")
		status, _, body := get(t, base+"/metrics", "", "")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, `domainclass_http_requests_total{code="401",method="GET",route="/riverui/*path"} 1`)
		require.Contains(t, body, `domainclass_http_requests_total{code="400",method="GET",route="/domains/classify/:job_id"} 1`)
	})
}
