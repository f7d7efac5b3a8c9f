package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/domainclass/domainclass/classifier"
)

// CallerBudget is a caller's daily model budget; 0 is no limit of that
// kind.
type CallerBudget struct {
	ModelCallsPerDay int
	SpendPerDayUSD   float64
}

// Limited reports whether the budget limits anything.
func (b CallerBudget) Limited() bool { return b.ModelCallsPerDay > 0 || b.SpendPerDayUSD > 0 }

// CallerUsage is what a caller's work asked of the model on one UTC day.
type CallerUsage struct {
	Caller     string
	Day        time.Time
	ModelCalls int
	SpendUSD   float64
}

// CallerBudgetSet sets caller's budget; a zero budget removes it.
func CallerBudgetSet(ctx context.Context, exec DBTX, caller string, b CallerBudget) error {
	if !b.Limited() {
		_, err := exec.Exec(ctx, `DELETE FROM caller_budget WHERE caller = $1`, caller)
		return translate(err)
	}
	_, err := exec.Exec(ctx, `
		INSERT INTO caller_budget (caller, model_calls_per_day, spend_per_day_usd) VALUES ($1, NULLIF($2::integer, 0), NULLIF($3::numeric, 0))
		ON CONFLICT (caller) DO UPDATE SET model_calls_per_day = excluded.model_calls_per_day, spend_per_day_usd = excluded.spend_per_day_usd`,
		caller, b.ModelCallsPerDay, b.SpendPerDayUSD)
	return translate(err)
}

// CallerBudgets returns every caller's budget, by caller.
func CallerBudgets(ctx context.Context, exec DBTX) (map[string]CallerBudget, error) {
	rows, err := exec.Query(ctx, `SELECT caller, coalesce(model_calls_per_day, 0), coalesce(spend_per_day_usd, 0)::float8 FROM caller_budget`)
	if err != nil {
		return nil, translate(err)
	}
	out := map[string]CallerBudget{}
	var (
		caller string
		b      CallerBudget
	)
	_, err = pgx.ForEachRow(rows, []any{&caller, &b.ModelCallsPerDay, &b.SpendPerDayUSD}, func() error {
		out[caller] = b
		return nil
	})
	return out, translate(err)
}

// CallerToday returns caller's budget and what its work asked of the model
// today (UTC, by the database's clock), and when today ends.
func CallerToday(ctx context.Context, exec DBTX, caller string) (CallerBudget, CallerUsage, time.Time, error) {
	var (
		b     CallerBudget
		u     = CallerUsage{Caller: caller}
		reset time.Time
	)
	err := exec.QueryRow(ctx, `
		SELECT coalesce(b.model_calls_per_day, 0), coalesce(b.spend_per_day_usd, 0)::float8,
		       d.day, coalesce(s.model_calls, 0), coalesce(s.spend_usd, 0), (d.day + 1)::timestamp AT TIME ZONE 'UTC'
		FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS day) d
		LEFT JOIN caller_budget b ON b.caller = $1
		LEFT JOIN caller_spend s ON s.caller = $1 AND s.day = d.day`, caller).
		Scan(&b.ModelCallsPerDay, &b.SpendPerDayUSD, &u.Day, &u.ModelCalls, &u.SpendUSD, &reset)
	return b, u, reset, translate(err)
}

// CallerSpendReserve counts one model call of caller, at usd, against
// today's budget before it starts: ok is false, and nothing is counted,
// when it would take the caller past its calls or spend a day. The day it
// was counted on is what CallerSpendAdd corrects.
func CallerSpendReserve(ctx context.Context, exec DBTX, caller string, usd float64) (day time.Time, ok bool, err error) {
	day, granted, err := CallerSpendReserveMany(ctx, exec, caller, 1, usd)
	return day, granted == 1, err
}

// CallerSpendReserveMany counts up to n model calls of caller, at usdEach
// each, against today's budget before they start: as many as fit under
// both the calls and the spend a day (0..n; all n with no budget), in one
// statement. The day they were counted on is what CallerSpendAdd corrects,
// and gives back the calls not made.
func CallerSpendReserveMany(ctx context.Context, exec DBTX, caller string, n int, usdEach float64) (day time.Time, granted int, err error) {
	if n <= 0 {
		return day, 0, nil
	}
	// The caller's day row is locked (FOR UPDATE) before the budget's room
	// is read from it, so that concurrent reservers of one caller count
	// one at a time and never pass the budget together. The first
	// reservation of a day finds no row to lock: when another inserted it
	// meanwhile, nothing is counted (the conflict's update requires the
	// lock) and the statement runs again, on the row.
	for range 3 {
		var inserted bool
		err = exec.QueryRow(ctx, `
			WITH cur AS (
				SELECT model_calls, spend_usd FROM caller_spend
				WHERE caller = $1 AND day = (now() AT TIME ZONE 'UTC')::date
				FOR UPDATE
			), room AS (
				SELECT coalesce(cur.model_calls, 0) AS calls, coalesce(cur.spend_usd, 0) AS usd,
				       b.model_calls_per_day AS max_calls, b.spend_per_day_usd::float8 AS max_usd
				FROM (SELECT) one LEFT JOIN cur ON true LEFT JOIN caller_budget b ON b.caller = $1
			), fit AS (
				SELECT least($2::bigint,
				             CASE WHEN max_calls IS NULL THEN $2::bigint ELSE greatest(max_calls - calls, 0) END,
				             CASE WHEN max_usd IS NULL THEN $2::bigint
				                  WHEN usd > max_usd THEN 0
				                  WHEN $3::float8 <= 0 THEN $2::bigint
				                  ELSE floor((max_usd - usd) / $3::float8)::bigint END) AS n,
				       usd, max_usd
				FROM room
			), given AS (
				-- floor() of a float quotient may be one too many at the
				-- edge: the spend after it must be within the budget.
				SELECT CASE WHEN max_usd IS NOT NULL AND n > 0 AND usd + n * $3::float8 > max_usd THEN n - 1 ELSE n END AS n
				FROM fit
			), counted AS (
				INSERT INTO caller_spend AS s (caller, day, model_calls, spend_usd)
				SELECT $1, (now() AT TIME ZONE 'UTC')::date, n, n * $3::float8 FROM given WHERE n > 0
				ON CONFLICT (caller, day) DO UPDATE SET model_calls = s.model_calls + excluded.model_calls, spend_usd = s.spend_usd + excluded.spend_usd
				WHERE EXISTS (SELECT FROM cur)
				RETURNING 1
			)
			SELECT (now() AT TIME ZONE 'UTC')::date, n, n = 0 OR EXISTS (SELECT FROM counted) FROM given`,
			caller, n, usdEach).Scan(&day, &granted, &inserted)
		if err != nil || inserted {
			return day, granted, translate(err)
		}
	}
	return day, 0, fmt.Errorf("error counting model calls of %s: its day row kept changing under the count", caller)
}

// CallerSpendAdd adds calls and usd (either may be negative: a correction
// from a call's usage, a call taken back) to caller's count of day.
func CallerSpendAdd(ctx context.Context, exec DBTX, caller string, day time.Time, calls int, usd float64) error {
	_, err := exec.Exec(ctx, `
		INSERT INTO caller_spend AS s (caller, day, model_calls, spend_usd) VALUES ($1, $2, greatest($3::bigint, 0), greatest($4::float8, 0))
		ON CONFLICT (caller, day) DO UPDATE SET model_calls = greatest(s.model_calls + $3::bigint, 0), spend_usd = greatest(s.spend_usd + $4::float8, 0)`,
		caller, day, calls, usd)
	return translate(err)
}

// CallerSpendTop returns the n callers that spent most today (UTC), most
// first, and the sum of the others.
func CallerSpendTop(ctx context.Context, exec DBTX, n int) (top []CallerUsage, others CallerUsage, err error) {
	rows, err := exec.Query(ctx, `
		WITH today AS (
			SELECT caller, day, model_calls, spend_usd,
			       row_number() OVER (ORDER BY spend_usd DESC, model_calls DESC, caller) AS rank
			FROM caller_spend WHERE day = (now() AT TIME ZONE 'UTC')::date
		)
		SELECT caller, day, model_calls, spend_usd FROM today WHERE rank <= $1
		UNION ALL
		SELECT '', (now() AT TIME ZONE 'UTC')::date, coalesce(sum(model_calls), 0), coalesce(sum(spend_usd), 0)
		FROM today WHERE rank > $1
		ORDER BY spend_usd DESC`, n)
	all, err := collect(rows, err, func(row pgx.CollectableRow) (CallerUsage, error) {
		var u CallerUsage
		err := row.Scan(&u.Caller, &u.Day, &u.ModelCalls, &u.SpendUSD)
		return u, err
	})
	if err != nil {
		return nil, others, err
	}
	for _, u := range all {
		if u.Caller == "" {
			others = u
		} else {
			top = append(top, u)
		}
	}
	return top, others, nil
}

// ListModelCalls counts the distinct domains of list listID (as uploaded,
// in tx) that no override answers and no cached answer fresh under f and w
// at now: the model calls the list will make, as DomainsAnswered counts
// them for a dry run.
func ListModelCalls(ctx context.Context, tx DBTX, listID uuid.UUID, classifierName string, f classifier.Freshness, w classifier.Want, now time.Time) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `
		SELECT count(*)
		FROM list_row d
		LEFT JOIN override o ON o.classifier = $2 AND o.domain = d.domain
		LEFT JOIN result r ON r.classifier = $2 AND r.domain = d.domain
		WHERE d.list_id = $1 AND d.status = 'PENDING' AND d.first_row IS NULL AND o.domain IS NULL
		  AND NOT coalesce(`+freshResult("r", 3)+`, false)`,
		append([]any{listID, classifierName}, freshArgs(f, w, now)...)...).Scan(&n)
	return n, translate(err)
}
