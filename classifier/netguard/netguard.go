// Package netguard keeps outgoing requests to addresses of the public
// internet: the homepage search provider and webhook deliveries fetch
// addresses that callers choose, so a name that resolves to a private,
// loopback, link-local or cloud-metadata address is refused at connect time
// (after DNS, so rebinding does not help).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress is returned for a connection to a non-public address.
var ErrForbiddenAddress = errors.New("address is not a public internet address")

// nonPublic lists ranges that are not reachable public unicast space, beyond
// what netip.Addr's predicates cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 can reach private IPv4
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
}

// Public reports whether ip is a public unicast address. Loopback, private
// (RFC 1918, fc00::/7), link-local (169.254.0.0/16, where cloud metadata
// lives, and fe80::/10), multicast, unspecified and reserved ranges are not.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Dialer dials TCP, refusing non-public addresses unless AllowPrivate.
type Dialer struct {
	AllowPrivate bool
	Timeout      time.Duration
}

// DialContext is a net.Dialer's, with the address checked after resolution,
// right before connect.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.Timeout, Control: d.control}
	return nd.DialContext(ctx, network, addr)
}

func (d *Dialer) control(_, address string, _ syscall.RawConn) error {
	if d.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
	}
	return nil
}

// Client returns an HTTP client that connects only through d, uses no proxy
// from the environment, and stops after maxRedirects (0: redirects are not
// followed and the 3xx is returned).
func (d *Dialer) Client(timeout time.Duration, maxRedirects int) *http.Client {
	transport := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          50,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// CheckHost refuses a host that is a literal non-public IP address (or
// "localhost") unless allowPrivate. Names are checked again at connect time
// by Dialer; this catches the obvious cases early, for a clear error.
func CheckHost(host string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	if host == "localhost" || len(host) > len(".localhost") && host[len(host)-len(".localhost"):] == ".localhost" {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !Public(ip) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ip)
	}
	return nil
}
