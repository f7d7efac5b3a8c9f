// Package capacity holds the deployment's model capacity where the worker
// processes share it: the leases of the provider account in Postgres
// (AccountStore, llm.LeaseStore), a process's metrics of its part
// (Metrics, llm.CapacityObserver), and the limits configured, which wins
// and what a worker says of them (Limits). The rules of the lease are
// classifier/llm's (lease.go, allocate.go); the queries db's.
package capacity

import (
	"context"
	"encoding/json"
	"time"

	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
)

// AccountStore is the deployment's model capacity in Postgres
// (llm.LeaseStore): the leases of one provider account, named by
// llm.AccountOf.
type AccountStore struct {
	DB   db.Executor
	ID   string
	Name string
}

var _ llm.LeaseStore = AccountStore{}

// Renew implements llm.LeaseStore.
func (s AccountStore) Renew(ctx context.Context, holder string, ttl time.Duration,
	decide func(llm.Account, []llm.Lease) llm.Lease) (llm.Account, llm.Lease, error) {
	var mine llm.Lease
	acct, _, err := db.LLMLeaseRenew(ctx, s.DB, s.ID, s.Name, holder, ttl, func(a db.LLMAccount, rows []db.LLMLease) db.LLMLease {
		others := make([]llm.Lease, 0, len(rows))
		for _, r := range rows {
			l := llm.Lease{Holder: r.Holder, Share: r.Share, Slots: r.Slots}
			_ = json.Unmarshal(r.Demand, &l.Demand) // a demand it cannot read asks for nothing
			others = append(others, l)
		}
		mine = decide(accountOf(a), others)
		demand, _ := json.Marshal(mine.Demand)
		return db.LLMLease{Share: mine.Share, Slots: mine.Slots, Demand: demand}
	})
	mine.Holder = holder
	return accountOf(acct), mine, err
}

func accountOf(a db.LLMAccount) llm.Account {
	return llm.Account{CooldownUntil: a.CooldownUntil, Factor: a.Factor, FactorAt: a.FactorAt,
		StatedRPM: a.StatedRPM, StatedTPM: a.StatedTPM, Now: a.Now}
}

// Release implements llm.LeaseStore.
func (s AccountStore) Release(ctx context.Context, holder string) error {
	return db.LLMLeaseDelete(ctx, s.DB, s.ID, holder)
}

// Throttle implements llm.LeaseStore with the capacity's rule of how a 429
// lowers it.
func (s AccountStore) Throttle(ctx context.Context, wait time.Duration, lower bool) error {
	r := llm.ThrottleRule()
	if !lower {
		r.Factor = 1 // the cool-down only
	}
	return db.LLMAccountThrottle(ctx, s.DB, s.ID, wait, r.Factor, r.Floor, r.Recover, r.Damp)
}

// Stated implements llm.LeaseStore.
func (s AccountStore) Stated(ctx context.Context, rpm, tpm int) error {
	return db.LLMAccountStated(ctx, s.DB, s.ID, rpm, tpm)
}
