package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// LLMAccount is a provider account's shared state (see migration 00013):
// read, and locked, by every lease renewal. Now is the database's clock,
// which every process's leases are measured by.
type LLMAccount struct {
	CooldownUntil        time.Time
	Factor               float64
	FactorAt             time.Time
	StatedRPM, StatedTPM int // 0: not stated
	Now                  time.Time
}

// LLMLease is a worker process's lease on its account's capacity.
type LLMLease struct {
	Holder    string
	Share     float64 // of the account's requests and tokens a minute
	Slots     int     // calls in flight
	Demand    []byte  // JSON: what the holder asked for
	ExpiresAt time.Time
}

// LLMLeaseRenew renews holder's lease on account id (created, with name,
// on first use), in one short transaction: it locks the account's row, so
// that renewals run one at a time and never grant more than the account
// has; reads the account and every other live lease; asks decide for the
// holder's lease from them; and writes it, to expire after ttl. It returns
// the account as read and the lease written.
func LLMLeaseRenew(ctx context.Context, b Beginner, id, name, holder string, ttl time.Duration,
	decide func(LLMAccount, []LLMLease) LLMLease) (LLMAccount, LLMLease, error) {
	var (
		acct LLMAccount
		mine LLMLease
	)
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		var err error
		if acct, err = llmAccountLock(ctx, tx, id, name); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT holder, share, slots, demand, expires_at FROM llm_lease
			WHERE account = $1 AND holder <> $2 AND expires_at > now()`, id, holder)
		others, err := collect(rows, err, func(row pgx.CollectableRow) (LLMLease, error) {
			var l LLMLease
			err := row.Scan(&l.Holder, &l.Share, &l.Slots, &l.Demand, &l.ExpiresAt)
			return l, err
		})
		if err != nil {
			return err
		}
		mine = decide(acct, others)
		mine.Holder = holder
		return tx.QueryRow(ctx, `
			INSERT INTO llm_lease (account, holder, share, slots, demand, expires_at)
			VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
			ON CONFLICT (account, holder) DO UPDATE SET share = excluded.share, slots = excluded.slots,
			       demand = excluded.demand, expires_at = excluded.expires_at
			RETURNING expires_at`,
			id, holder, mine.Share, mine.Slots, mine.Demand, ttl.Seconds()).Scan(&mine.ExpiresAt)
	})
	return acct, mine, translate(err)
}

func llmAccountLock(ctx context.Context, tx pgx.Tx, id, name string) (LLMAccount, error) {
	var (
		a        LLMAccount
		rpm, tpm *int32
	)
	// The row exists after the first renewal of all: insert it only then,
	// so that the usual renewal is one locking read.
	for range 2 {
		err := tx.QueryRow(ctx, `
			SELECT cooldown_until, factor, factor_at, stated_rpm, stated_tpm, now()
			FROM llm_account WHERE id = $1 FOR UPDATE`, id).
			Scan(&a.CooldownUntil, &a.Factor, &a.FactorAt, &rpm, &tpm, &a.Now)
		if err == nil {
			a.StatedRPM, a.StatedTPM = int(deref(rpm)), int(deref(tpm))
			return a, nil
		} else if !isNotFound(translate(err)) {
			return a, translate(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO llm_account (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, name); err != nil {
			return a, translate(err)
		}
	}
	return a, ErrNotFound
}

// LLMLeaseDelete gives holder's lease up (a process stopping), so its
// share goes back to the others at once instead of when it expires.
func LLMLeaseDelete(ctx context.Context, exec DBTX, id, holder string) error {
	_, err := exec.Exec(ctx, `DELETE FROM llm_lease WHERE account = $1 AND holder = $2`, id, holder)
	return translate(err)
}

// LLMAccountThrottle records that the provider throttled account id: no
// call starts for wait (from now, on the database's clock), and, when
// lower is below 1, the capacity's factor drops to lower × f, where f is
// the factor as recovered by now (f + elapsed/recover, at most 1), never
// below floor (the rule of classifier/llm's capacity, in SQL so that it applies to the
// row as it is). The factor drops at most once per damp, so that the many
// calls a burst of 429s answers lower it once.
func LLMAccountThrottle(ctx context.Context, exec DBTX, id string, wait time.Duration, lower, floor float64, recover, damp time.Duration) error {
	_, err := exec.Exec(ctx, `
		UPDATE llm_account SET cooldown_until = greatest(cooldown_until, now() + make_interval(secs => $2)),
		       factor = CASE WHEN $3 < 1 AND factor_at < now() - make_interval(secs => $6)
		                     THEN greatest($4, least(1, factor + extract(epoch FROM now() - factor_at) / $5) * $3)
		                     ELSE factor END,
		       factor_at = CASE WHEN $3 < 1 AND factor_at < now() - make_interval(secs => $6) THEN now() ELSE factor_at END
		WHERE id = $1`,
		id, wait.Seconds(), lower, floor, recover.Seconds(), damp.Seconds())
	return translate(err)
}

// LLMAccountStated records the limits the provider stated for account id
// (its x-ratelimit-limit-* headers); 0 leaves one as it is.
func LLMAccountStated(ctx context.Context, exec DBTX, id string, rpm, tpm int) error {
	_, err := exec.Exec(ctx, `
		UPDATE llm_account SET stated_rpm = coalesce(NULLIF($2, 0), stated_rpm), stated_tpm = coalesce(NULLIF($3, 0), stated_tpm)
		WHERE id = $1`, id, rpm, tpm)
	return translate(err)
}

// LLMAccountStatedGet returns the limits the provider last stated for
// account id (0: not stated, or no such account yet).
func LLMAccountStatedGet(ctx context.Context, exec DBTX, id string) (rpm, tpm int, err error) {
	err = exec.QueryRow(ctx, `SELECT coalesce(stated_rpm, 0), coalesce(stated_tpm, 0) FROM llm_account WHERE id = $1`, id).Scan(&rpm, &tpm)
	if err == pgx.ErrNoRows {
		return 0, 0, nil
	}
	return rpm, tpm, translate(err)
}
