package pools_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/db/pools"
)

// DBMaxConns sizes the API's pool and the workers' connections, of which
// list work's part is derived; the workers' default follows their queues'
// workers.
func TestSizes(t *testing.T) {
	t.Parallel()
	queues := func(s pools.Sizes) pools.Sizes { s.ClassifyWorkers, s.ListWorkers = 10, 32; return s }
	for _, tc := range []struct {
		sizes                   pools.Sizes
		api, worker, jobs, list int32
	}{
		{queues(pools.Sizes{}), pools.DefaultAPIMaxConns, 10 + 16 + 10, 10 + 16 + 10 - 4, 4},
		{pools.Sizes{ClassifyWorkers: 20, ListWorkers: 2}, pools.DefaultAPIMaxConns, 20 + 2 + 10, 20 + 10, 2},
		{queues(pools.Sizes{DBMaxConns: 12}), 12, 12, 8, 4},
		{queues(pools.Sizes{DBMaxConns: 6}), 6, 6, 3, 3},
		{queues(pools.Sizes{DBMaxConns: 3}), 3, 3, 2, 1},
	} {
		require.NoError(t, tc.sizes.Validate())
		require.Equal(t, []int32{tc.api, tc.worker, tc.jobs, tc.list},
			[]int32{tc.sizes.API(), tc.sizes.Worker(), tc.sizes.Jobs(), tc.sizes.List()}, "%+v", tc.sizes)
	}
	require.ErrorContains(t, queues(pools.Sizes{DBMaxConns: -1}).Validate(), "must not be negative")
	require.EqualError(t, queues(pools.Sizes{DBMaxConns: 2}).Validate(),
		"DBMaxConns (2) must leave at least 2 connections to classify jobs and River beside list work's 1: set at least 3")
}
