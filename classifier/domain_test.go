package classifier

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()

	accepted := []struct {
		name, in, want string
	}{
		{"Bare", "example.com", "example.com"},
		{"TrimsSpace", "  example.com \t\n", "example.com"},
		{"Lowercases", "EXAMPLE.Com", "example.com"},
		{"StripsScheme", "https://example.com", "example.com"},
		{"StripsOtherScheme", "ftp://example.com", "example.com"},
		{"StripsProtocolRelative", "//example.com/x", "example.com"},
		{"StripsUserinfo", "https://user:pa@ss@example.com/", "example.com"},
		{"StripsPort", "example.com:8443", "example.com"},
		{"StripsEmptyPort", "example.com:", "example.com"},
		{"StripsPath", "example.com/about/us", "example.com"},
		{"StripsQuery", "example.com?utm=1", "example.com"},
		{"StripsFragment", "example.com#top", "example.com"},
		{"StripsEverything", "HTTPS://bob@WWW.Example.com:443/a/b?c=d#e", "example.com"},
		{"StripsTrailingDot", "example.com.", "example.com"},
		{"RegistrableFromWWW", "www.example.com", "example.com"},
		{"RegistrableFromDeepHost", "a.b.shop.example.com", "example.com"},
		{"MultiLabelSuffix", "shop.example.co.uk", "example.co.uk"},
		{"MultiLabelSuffixBare", "example.co.uk", "example.co.uk"},
		{"PrivateSuffixKeepsOwner", "www.acme.github.io", "acme.github.io"},
		{"IDNToPunycode", "München.de", "xn--mnchen-3ya.de"},
		{"IDNSubdomain", "https://www.bücher.example.com/", "example.com"},
		{"IDNJapanese", "例え.jp", "xn--r8jz45g.jp"},
		{"IDNFullWidthDot", "example。com", "example.com"},
		{"PunycodeStays", "xn--mnchen-3ya.de", "xn--mnchen-3ya.de"},
		{"Hyphen", "coca-cola.com", "coca-cola.com"},
		{"Digits", "3m.com", "3m.com"},
		{"NewGTLD", "brand.coffee", "brand.coffee"},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeDomain(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	rejected := []struct {
		name, in, reason string
	}{
		{"Empty", "", ReasonEmpty},
		{"Blank", "   ", ReasonEmpty},
		{"OnlyScheme", "https://", ReasonEmpty},
		{"OnlyDot", ".", ReasonEmpty},
		{"IPv4", "192.168.1.1", ReasonIPAddress},
		{"IPv4URL", "http://10.0.0.1:8080/x", ReasonIPAddress},
		{"IPv6", "::1", ReasonIPAddress},
		{"IPv6Bracketed", "http://[2001:db8::1]:443/", ReasonIPAddress},
		{"NumericLastLabel", "1.2.3", ReasonIPAddress},
		{"Localhost", "localhost", ReasonLocalhost},
		{"LocalhostPort", "http://localhost:8080", ReasonLocalhost},
		{"LocalhostSubdomain", "api.localhost", ReasonLocalhost},
		{"SingleLabel", "intranet", ReasonSingleLabel},
		{"UnknownTLD", "example.zz", ReasonUnknownTLD},
		{"ReservedTLD", "example.test", ReasonUnknownTLD},
		{"LocalTLD", "printer.local", ReasonUnknownTLD},
		{"Underscore", "ex_ample.com", ReasonBadCharacters},
		{"Space", "exa mple.com", ReasonBadCharacters},
		{"Comma", "example,com", ReasonBadCharacters},
		{"Backslash", `example.com\evil`, ReasonBadCharacters},
		{"EmptyLabel", "a..example.com", ReasonLabelLength},
		{"LongLabel", strings.Repeat("a", 64) + ".com", ReasonLabelLength},
		{"LongDomain", strings.Repeat("abcdefghi.", 26) + "com", ReasonDomainLength},
		{"LeadingHyphen", "-example.com", ReasonBadHyphen},
		{"TrailingHyphen", "example-.com", ReasonBadHyphen},
		{"Wildcard", "*.example.com", ReasonWildcard},
		{"WildcardURL", "https://*.example.com/", ReasonWildcard},
		{"PublicSuffix", "co.uk", ReasonPublicSuffix},
		{"PrivatePublicSuffix", "github.io", ReasonPublicSuffix},
		{"BadPort", "example.com:http", ReasonBadPort},
		{"BadPunycode", "xn--zz.com", ReasonBadIDN},
		{"ZeroWidthJoiner", "a\u200d.com", ReasonBadIDN},
		{"TooLong", strings.Repeat("a", 3000) + ".com", ReasonInputTooLong},
	}
	for _, tt := range rejected {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeDomain(tt.in)
			require.Empty(t, got)
			var domErr *DomainError
			require.True(t, errors.As(err, &domErr), "want *DomainError, got %v", err)
			require.Equal(t, tt.reason, domErr.Reason)
			require.Equal(t, tt.in, domErr.Input)
		})
	}
}

func TestNormalizeDomains(t *testing.T) {
	t.Parallel()

	t.Run("DedupesInFirstSeenOrder", func(t *testing.T) {
		t.Parallel()
		got, bad := NormalizeDomains([]string{"b.com", "https://www.A.com/x", "a.com", "shop.b.com", "c.co.uk"})
		require.Empty(t, bad)
		require.Equal(t, []DomainInput{
			{Input: "b.com", Domain: "b.com"},
			{Input: "https://www.A.com/x", Domain: "a.com"},
			{Input: "c.co.uk", Domain: "c.co.uk"},
		}, got)
	})

	t.Run("ListsEveryRejectedInput", func(t *testing.T) {
		t.Parallel()
		got, bad := NormalizeDomains([]string{"ok.com", "", "10.0.0.1", "ok.com"})
		require.Equal(t, []DomainInput{{Input: "ok.com", Domain: "ok.com"}}, got)
		require.Equal(t, []ItemError{
			{Input: "", Reason: ReasonEmpty},
			{Input: "10.0.0.1", Reason: ReasonIPAddress},
		}, bad)
	})
}

func FuzzNormalizeDomain(f *testing.F) {
	for _, seed := range []string{
		"example.com", "https://user@www.Example.co.uk:8080/p?q#f", "München.de", "xn--mnchen-3ya.de",
		"例え.jp", "[::1]", "*.x.com", "a..b", "localhost", "github.io", "example。com", "http://", "..",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		once, err := NormalizeDomain(in)
		if err != nil {
			var domErr *DomainError
			if !errors.As(err, &domErr) || domErr.Reason == "" {
				t.Fatalf("NormalizeDomain(%q) returned an error without a reason: %v", in, err)
			}
			return
		}
		twice, err := NormalizeDomain(once)
		if err != nil {
			t.Fatalf("NormalizeDomain(%q) = %q, which is then rejected: %v", in, once, err)
		}
		if twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, once, twice)
		}
	})
}

// FuzzToASCII holds the fast path of toASCII to the IDNA profile's answers.
func FuzzToASCII(f *testing.F) {
	for _, s := range []string{"acme.com", "a-b.co.uk", "ab--cd.com", "xn--mnchen-3ya.de", "-a.com", "a-.com", "a..com",
		"a.com.", "", ".", "1.2.3.4", "a" + strings.Repeat("b", 70) + ".com", "münchen.de", "ACME.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !isPlainLDH(host) {
			return
		}
		got, err := toASCII(host)
		want, wantErr := idnaProfile.ToASCII(host)
		gotOK := err == nil && checkLabels(strings.TrimSuffix(got, ".")) == ""
		wantOK := wantErr == nil && checkLabels(strings.TrimSuffix(want, ".")) == ""
		if gotOK != wantOK || gotOK && got != want {
			t.Fatalf("toASCII(%q) = %q, %v; the profile: %q, %v", host, got, err, want, wantErr)
		}
	})
}

// FuzzIsIPAddress holds isIPAddress's shortcut for names to the parser.
func FuzzIsIPAddress(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "acme.com", "[::1]", "::1", "fe80::1%eth0", "1.2.3.4%eth0", "cafe.be", "1.2.3", "0x7f.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if i := strings.Index(h, "%"); i >= 0 {
			h = h[:i]
		}
		_, err := netip.ParseAddr(h)
		if got := isIPAddress(host); got != (err == nil) {
			t.Fatalf("isIPAddress(%q) = %v, the parser says %v", host, got, err == nil)
		}
	})
}
