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
		for _, path := range []string{"/riverui/", "/riverui/jobs", "/riverui/api/jobs?state=completed", "/riverui/api/jobs/retry",
			// Spellings that once reached the UI through the health checks' open door.
			"/riverui/api/health-checks/%2e%2e/jobs", "/riverui/api/health-checks/%2E%2E/%2E%2E/", "/riverui/api/health-checks/minimal/%2e%2e/%2e%2e/jobs",
			"/riverui/api/health-checks//../jobs", "/riverui/api/health-checks/minimal%2f..%2f..%2fjobs"} {
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

	t.Run("RefusesChangesFromAnotherSite", func(t *testing.T) {
		t.Parallel()
		base := riverUIServer(t, "ops", "s3cret")
		post := func(header ...string) int {
			req, err := http.NewRequest(http.MethodPost, base+"/riverui/api/jobs/cancel", strings.NewReader(`{"ids":["1"]}`))
			require.NoError(t, err)
			req.SetBasicAuth("ops", "s3cret") // what a browser that kept the credentials sends
			req.Header.Set("Content-Type", "text/plain")
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		require.Equal(t, http.StatusForbidden, post("Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"))
		require.Equal(t, http.StatusForbidden, post("Sec-Fetch-Site", "same-site"))
		require.Equal(t, http.StatusForbidden, post("Origin", "https://evil.example"), "an old browser: Origin alone")
		require.NotEqual(t, http.StatusForbidden, post("Sec-Fetch-Site", "same-origin"), "River UI's own pages")
		require.NotEqual(t, http.StatusForbidden, post(), "curl and scripts send neither")
	})

	t.Run("AnswersStayOutOfFramesAndCaches", func(t *testing.T) {
		t.Parallel()
		base := riverUIServer(t, "ops", "s3cret")
		for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=completed", "/healthz", "/domains/classify/x"} {
			_, header, _ := get(t, base+path, "ops", "s3cret")
			require.Equal(t, "DENY", header.Get("X-Frame-Options"), path)
			require.Equal(t, "frame-ancestors 'none'", header.Get("Content-Security-Policy"), path)
			require.Equal(t, "nosniff", header.Get("X-Content-Type-Options"), path)
			require.Equal(t, "no-store", header.Get("Cache-Control"), path)
		}
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
