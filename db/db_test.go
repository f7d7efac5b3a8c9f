package db_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/db/dbtest"
)

// DATABASE_URL's connect_timeout is what a connection may take to start;
// without one, the default lets a busy Postgres take seconds (7.6 s was
// seen under load) rather than failing every new connection for an hour.
func TestOpen_ConnectTimeout(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name           string
		connectTimeout string // "" leaves it out of the URL
		slowStart      time.Duration
		want           time.Duration
		reached        bool
	}{
		{"DefaultSurvivesASlowStart", "", 2 * time.Second, db.DefaultConnectTimeout, true},
		{"URLLongerThanTheStartIsHonoured", "10", 2 * time.Second, 10 * time.Second, true},
		{"URLShorterThanTheStartIsHonoured", "1", 3 * time.Second, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(dbtest.URL())
			require.NoError(t, err)
			u.Host = slowPostgres(t, u.Host, tc.slowStart)
			q := u.Query()
			q.Del("connect_timeout") // the test kit's own
			if tc.connectTimeout != "" {
				q.Set("connect_timeout", tc.connectTimeout)
			}
			u.RawQuery = q.Encode()
			d, err := db.Open(context.Background(), db.Config{URL: u.String(), MaxConns: 1})
			require.NoError(t, err)
			t.Cleanup(d.Close)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = d.Ping(ctx)
			if tc.reached {
				require.NoError(t, err, "a Postgres that takes %s to start a connection is reached", tc.slowStart)
			} else {
				require.ErrorIs(t, err, db.ErrUnavailable, "the URL's shorter timeout gives up before Postgres answers")
			}
			require.Equal(t, tc.want, d.Pool.Config().ConnConfig.ConnectTimeout)
		})
	}
}

// slowPostgres is the address of a proxy to the Postgres at upstream that
// keeps each new connection waiting for delay before it reaches Postgres:
// a server too busy to start connections at once.
func slowPostgres(t *testing.T, upstream string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	keep := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
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
		}
	}()
	return ln.Addr().String()
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
}
