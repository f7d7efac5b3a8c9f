package dbtest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// SlowPostgres is the address of a proxy to the Postgres at upstream that
// keeps each new connection waiting for delay before it reaches Postgres:
// a server too busy to start connections at once. Every connection is
// closed when the test ends.
func SlowPostgres(tb testing.TB, upstream string, delay time.Duration) string {
	tb.Helper()
	return stall(tb, func(client net.Conn, keep func(net.Conn)) {
		time.AfterFunc(delay, func() {
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				client.Close()
				return
			}
			keep(server)
			go pipe(server, client)
			go pipe(client, server)
		})
	})
}

// SilentPostgres is the address of a server that accepts connections and
// never says a word, until the test ends: a Postgres that hangs.
func SilentPostgres(tb testing.TB) string {
	tb.Helper()
	return stall(tb, func(net.Conn, func(net.Conn)) {})
}

// stall listens on loopback and hands each accepted connection to serve,
// keeping it (and whatever serve keeps) open until the test ends.
func stall(tb testing.TB, serve func(client net.Conn, keep func(net.Conn))) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	keep := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			keep(client)
			serve(client, keep)
		}
	}()
	return ln.Addr().String()
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
}
