package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
)

func TestClassifyCreate_CallbackURL(t *testing.T) {
	t.Parallel()
	body := `{"domains": ["acme.com"]}`

	callbackOf := func(t *testing.T, b *testBundle, r response) string {
		t.Helper()
		require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
		var a accepted
		require.NoError(t, json.Unmarshal(r.body, &a))
		job, err := db.JobGet(context.Background(), b.db.Pool, uuid.MustParse(a.JobID))
		require.NoError(t, err)
		return job.CallbackURL
	}

	t.Run("IsStoredWithTheJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooks: true})
		const u = "https://hooks.example.com/domainclass?token=abc"
		r := b.do(t, "POST", "/domains/classify", body, "X-Callback-URL", u)
		require.Equal(t, u, callbackOf(t, b, r))
		require.Equal(t, map[string]int{"classify_job": 1, "classify_job_domain": 0, "idempotency_key": 0, "river_job": 1}, b.counts(t))
	})

	t.Run("LoopbackAndHTTPWhenPrivateIsAllowed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooks: true, allowPrivate: true})
		for _, u := range []string{"http://127.0.0.1:9999/hook", "http://localhost:8080/", "https://10.1.2.3/x"} {
			r := b.do(t, "POST", "/domains/classify", body, "X-Callback-URL", u)
			require.Equal(t, u, callbackOf(t, b, r))
		}
	})

	t.Run("AnInternationalHostIsStoredAsPunycode", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooks: true})
		r := b.do(t, "POST", "/domains/classify", body, "X-Callback-URL", "https://Bücher.example:8443/hooks?t=ä")
		require.Equal(t, "https://xn--bcher-kva.example:8443/hooks?t=ä", callbackOf(t, b, r),
			"delivered to the host that was checked, as the transport would spell it")
	})

	t.Run("AListIsRefusedTheSameSpellings", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooks: true})
		for _, u := range []string{"https://127。0。0。1:19095/", "https://[::ffff:0:7f00:1]/h"} {
			r := b.do(t, "POST", "/lists", "acme.com\n", "Content-Type", "text/plain", "X-Callback-URL", u)
			requireProblem(t, r, http.StatusUnprocessableEntity, "invalid-callback-url")
		}
		require.Equal(t, noList, b.listCounts(t))
	})

	t.Run("NoHeaderNeedsNoSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		require.Equal(t, "", callbackOf(t, b, b.do(t, "POST", "/domains/classify", body)))
	})

	t.Run("IdempotencyKeyCoversTheCallback", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooks: true})
		first := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1", "X-Callback-URL", "https://a.example.com/h")
		require.Equal(t, http.StatusAccepted, first.status)
		again := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1", "X-Callback-URL", "https://a.example.com/h")
		require.Equal(t, first.body, again.body)
		other := b.do(t, "POST", "/domains/classify", body, "Idempotency-Key", "k1", "X-Callback-URL", "https://b.example.com/h")
		requireProblem(t, other, http.StatusUnprocessableEntity, "idempotency-key-reused")
		require.Equal(t, 1, b.counts(t)["classify_job"])
	})

	for _, tt := range []struct {
		name, url, slug, detail string
		opts                    setupOpts
	}{
		{name: "WithoutWebhookSecret", url: "https://hooks.example.com/h", slug: "webhooks-not-configured",
			detail: "This service has no WEBHOOK_SECRET"},
		{name: "Relative", url: "/hooks/domainclass", detail: "must be an absolute https URL"},
		{name: "NoScheme", url: "hooks.example.com/h", detail: "must be an absolute https URL"},
		{name: "OtherScheme", url: "ftp://hooks.example.com/h", detail: "must be an absolute https URL"},
		{name: "OtherSchemeEvenWhenPrivateIsAllowed", url: "file:///etc/passwd", detail: "must be an absolute https URL",
			opts: setupOpts{webhooks: true, allowPrivate: true}},
		{name: "NoHost", url: "https:///h", detail: "must be an absolute https URL"},
		{name: "PlainHTTP", url: "http://hooks.example.com/h", detail: "must use https"},
		{name: "Credentials", url: "https://user:pw@hooks.example.com/h", detail: "must not hold credentials"},
		{name: "TooLong", url: "https://hooks.example.com/" + strings.Repeat("a", 2048), detail: "longer than 2048"},
		{name: "Loopback", url: "https://127.0.0.1/h", detail: "private, loopback or link-local address (127.0.0.1)"},
		{name: "LoopbackIPv6", url: "https://[::1]:8443/h", detail: "(::1)"},
		{name: "Private", url: "https://10.0.0.7/h", detail: "(10.0.0.7)"},
		{name: "PrivateMappedIPv6", url: "https://[::ffff:192.168.0.1]/h", detail: "(::ffff:192.168.0.1)"},
		{name: "Metadata", url: "https://169.254.169.254/latest/meta-data/", detail: "(169.254.169.254)"},
		{name: "LinkLocalIPv6", url: "https://[fe80::1%25eth0]/h", detail: "(fe80::1%eth0)"},
		{name: "Localhost", url: "https://localhost/h", detail: "(localhost)"},
		{name: "LocalhostShouting", url: "https://LOCALHOST./h", detail: "(localhost)"},
		{name: "LocalhostSubdomain", url: "https://api.localhost/h", detail: "(api.localhost)"},
		// Found by a hostile review: IPv6 ranges that carry IPv4, and IPv4
		// spelt as resolvers read it (inet_aton), were accepted and dialled.
		{name: "NAT64LocalUse", url: "https://[64:ff9b:1::a00:1]/h", detail: "(64:ff9b:1::a00:1)"},
		{name: "SixToFour", url: "https://[2002:7f00:1::]/h", detail: "(2002:7f00:1::)"},
		{name: "IPv4Compatible", url: "https://[::7f00:1]/h", detail: "(::7f00:1)"},
		{name: "SiteLocal", url: "https://[fec0::1]/h", detail: "(fec0::1)"},
		{name: "IPv4AsOneNumber", url: "https://2130706433/h", detail: "(2130706433)"},
		{name: "IPv4Hex", url: "https://0x7f.1/h", detail: "(0x7f.1)"},
		{name: "IPv4Octal", url: "https://0177.0.0.1/h", detail: "(0177.0.0.1)"},
		{name: "IPv4Short", url: "https://127.1/h", detail: "(127.1)"},
		{name: "EmptyLabel", url: "https://example.com../h", detail: "empty label"},
		// Found by the second hostile review: spellings that IDNA (UTS 46)
		// maps to a refused host were accepted, and each delivery burned an
		// attempt at connect time.
		{name: "IdeographicFullStops", url: "https://127。0。0。1:19095/", detail: "(127.0.0.1)"},
		{name: "FullwidthDigits", url: "https://１２７.0.0.1/h", detail: "(127.0.0.1)"},
		{name: "FullwidthLocalhost", url: "https://ｌｏｃａｌｈｏｓｔ/h", detail: "(localhost)"},
		{name: "IdeographicEmptyLabel", url: "https://example。。com/h", detail: "empty label"},
		{name: "IPv4Translated", url: "https://[::ffff:0:7f00:1]/h", detail: "(::ffff:0:7f00:1)"},
		{name: "IPv6OutsideGlobalUnicast", url: "https://[4000::1]/h", detail: "(4000::1)"},
		{name: "NotAnInternationalName", url: "https://exa\u202emple.com/h", detail: "not a valid domain name"},
		{name: "PortOutOfRange", url: "https://example.com:99999/h", detail: "invalid port"},
	} {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tt.opts
			if tt.slug == "" {
				tt.slug = "invalid-callback-url"
				if !opts.webhooks {
					opts = setupOpts{webhooks: true}
				}
			}
			b := setup(t, opts)
			r := b.do(t, "POST", "/domains/classify", body, "X-Callback-URL", tt.url)
			p := requireProblem(t, r, http.StatusUnprocessableEntity, tt.slug)
			require.Contains(t, p.Detail, tt.detail)
			require.Equal(t, nothing, b.counts(t), "nothing may be written on a 422")
		})
	}
}
