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
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress is returned for a connection to a non-public address.
var ErrForbiddenAddress = errors.New("address is not a public internet address")

// nonPublic lists the ranges that are not globally reachable unicast
// space, beyond what netip.Addr's predicates cover (loopback, RFC 1918 and
// fc00::/7, link-local, multicast, unspecified). Taken from the IANA IPv4
// and IPv6 Special-Purpose Address Registries
// (https://www.iana.org/assignments/iana-ipv4-special-registry/,
// https://www.iana.org/assignments/iana-ipv6-special-registry/, both as of
// 2025): every entry whose "Globally Reachable" is False or N/A, plus
// deprecated IPv6 ranges that embed an IPv4 address or were site-local.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791)
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation, TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast (RFC 7526)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation, TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation, TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved (RFC 1112), with the limited broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible, deprecated (RFC 4291): ::7f00:1 is 127.0.0.1
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 well-known prefix (RFC 6052): reaches private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // NAT64 local-use (RFC 8215)
	netip.MustParsePrefix("100::/64"),        // discard-only (RFC 6666)
	netip.MustParsePrefix("100:0:0:1::/64"),  // dummy prefix (RFC 9780)
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo among them (RFC 2928, 4380)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),       // 6to4 (RFC 3056): 2002:7f00:1:: is 127.0.0.1
	netip.MustParsePrefix("3fff::/20"),       // documentation (RFC 9637)
	netip.MustParsePrefix("5f00::/16"),       // segment routing SIDs (RFC 9602)
	netip.MustParsePrefix("fec0::/10"),       // site-local, deprecated (RFC 3879)
}

// globalUnicast is the only IPv6 space IANA allocates for global unicast
// (https://www.iana.org/assignments/ipv6-address-space/): the rest is
// reserved, and holds spellings of IPv4 addresses such as the
// IPv4-translated ::ffff:0:7f00:1 (RFC 2765), which is 127.0.0.1.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// Public reports whether ip is a public unicast address. Loopback, private
// (RFC 1918, fc00::/7), link-local (169.254.0.0/16, where cloud metadata
// lives, and fe80::/10), multicast, unspecified and reserved ranges are
// not, nor is IPv6 outside 2000::/3.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	if ip.Is6() && !globalUnicast.Contains(ip) {
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

// CheckHost refuses a host that is a non-public IP address (or
// "localhost") unless allowPrivate, reading it as resolvers do: inet_aton's
// forms too ("2130706433", "0x7f.1", "0177.0.0.1", "127.1" are all
// 127.0.0.1 to getaddrinfo). Names are checked again at connect time by
// Dialer; this catches the obvious cases early, for a clear error.
func CheckHost(host string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		var ok bool
		if ip, ok = parseInetAton(host); !ok {
			return nil // a name
		}
	}
	if !Public(ip) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ip)
	}
	return nil
}

// parseInetAton reads host as inet_aton(3) does, which getaddrinfo uses
// before it asks DNS: one to four parts, each decimal, octal (leading 0) or
// hex (0x); the last part fills the bytes the others left. It reports false
// for a name, or for numbers out of range (which resolvers refuse too).
func parseInetAton(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			base, p = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(32-8*(len(vals)-1)) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}
