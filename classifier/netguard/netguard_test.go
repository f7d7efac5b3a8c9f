package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPublic(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true,
		"127.0.0.1": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00:ec2::254": false, "0.0.0.0": false, "::": false,
		"100.64.0.1": false, "224.0.0.1": false, "255.255.255.255": false, "::ffff:127.0.0.1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::a00:1": false, "192.0.2.1": false,
		"64:ff9b:1::a00:1": false, "2002:7f00:1::": false, "::7f00:1": false, "fec0::1": false,
		"2001:db8::1": false, "3fff::1": false, "100::1": false, "192.88.99.1": false,
		"2a00:1450:4001::200e": true, "93.184.215.14": true,
		// IPv6 outside global unicast (2000::/3): IPv4-translated
		// (::ffff:0:0:0/96, RFC 2765) and addresses not yet allocated.
		"::ffff:0:7f00:1": false, "::ffff:0:808:808": false, "4000::1": false, "e000::1": false, "1::1": false,
	} {
		require.Equal(t, want, Public(netip.MustParseAddr(addr)), addr)
	}
}

func TestDialer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		_, err := (&Dialer{Timeout: time.Second}).DialContext(context.Background(), "tcp", addr)
		require.True(t, errors.Is(err, ErrForbiddenAddress), "%s: got %v", addr, err)
	}
	c, err := (&Dialer{AllowPrivate: true, Timeout: time.Second}).DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	require.NoError(t, err)
	c.Close()
}

func TestCheckHost(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckHost("example.com", false))
	require.NoError(t, CheckHost("8.8.8.8", false))
	require.NoError(t, CheckHost("8.8", false), "8.0.0.8, public")
	require.NoError(t, CheckHost("1e100.net", false), "a name")
	require.NoError(t, CheckHost("0x.example", false), "a name")
	for _, h := range []string{"127.0.0.1", "localhost", "api.localhost", "169.254.169.254", "::1", "10.0.0.7",
		"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "0x7f000001", "10.1", "0xa9.254.169.254", "LOCALHOST"} {
		require.True(t, errors.Is(CheckHost(h, false), ErrForbiddenAddress), h)
		require.NoError(t, CheckHost(h, true))
	}
}

// TestParseInetAton holds the reading to inet_aton(3)'s.
func TestParseInetAton(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"127.0.1": "127.0.0.1", "0": "0.0.0.0", "1.2.3.4": "1.2.3.4", "0x0a.0.0.010": "10.0.0.8",
	} {
		got, ok := parseInetAton(in)
		require.True(t, ok, in)
		require.Equal(t, want, got.String(), in)
	}
	for _, in := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "1.16777216", "08.1.1.1", "1..2", "", "0x", "4294967296"} {
		_, ok := parseInetAton(in)
		require.False(t, ok, in)
	}
}
