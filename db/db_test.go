package db_test

import (
	"context"
	"net/url"
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
			u.Host = dbtest.SlowPostgres(t, u.Host, tc.slowStart)
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
