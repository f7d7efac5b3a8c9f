package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/httpapi"
	"github.com/domainclass/domainclass/spend"
	"github.com/domainclass/domainclass/wire"
)

// TestOnePrice: before any call was measured, the dry run's estimate, the
// budget check of an upload and the spend a caller is charged (as GET
// /callers/me shows it) price a call of the deployment's model alike, in
// either tier, each through its own entry point (issue 38: one price).
func TestOnePrice(t *testing.T) {
	t.Parallel()
	const calls = 10
	var body strings.Builder
	for i := range calls {
		fmt.Fprintf(&body, "fresh%d.com\n", i)
	}
	needs := regexp.MustCompile(`needs an estimated \$([0-9.]+)`)
	for _, model := range []string{"gpt-5.4-mini", "gpt-5-nano", "gpt-4.1-mini"} {
		for _, tier := range []string{classifier.TierStandard, classifier.TierEconomy} {
			t.Run(model+"/"+tier, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				price := llm.DefaultPrices().Price
				_, ok := price(model, 1, 1, false)
				require.True(t, ok, "the price table lists %s", model)
				b := setup(t, setupOpts{estimate: httpapi.Estimator{Model: model, Price: price}})

				// The dry run's estimate of calls fresh domains.
				r := b.do(t, "POST", "/lists?dry_run=true&tier="+tier, body.String(), "Content-Type", "text/plain")
				require.Equal(t, http.StatusOK, r.status, "%s", r.body)
				var est wire.ListEstimate
				require.NoError(t, json.Unmarshal(r.body, &est))
				require.Equal(t, calls, est.LLM)
				require.NotNil(t, est.EstimatedCostUSD, "%s", r.body)
				estimate := *est.EstimatedCostUSD

				// The upload's budget check: a budget of a micro-dollar
				// refuses the list, naming what it would cost.
				require.NoError(t, db.CallerBudgetSet(ctx, b.db.Pool, "team-a", db.CallerBudget{SpendPerDayUSD: 1e-6}))
				r = b.do(t, "POST", "/lists?tier="+tier, body.String(), "Content-Type", "text/plain")
				p := requireProblem(t, r, http.StatusUnprocessableEntity, "list-exceeds-budget")
				m := needs.FindStringSubmatch(p.Detail)
				require.NotNil(t, m, p.Detail)
				check, err := strconv.ParseFloat(strings.TrimSuffix(m[1], "."), 64)
				require.NoError(t, err)
				require.Equal(t, estimate, check, "the budget check prices the list as the dry run does")

				// The spend accounting: calls counted before they start, as
				// GET /callers/me shows them.
				spend := &spend.Spenders{DB: b.db.Pool, Price: price, Logger: slog.New(slog.DiscardHandler)}
				spender := spend.For("team-b")
				if tier == classifier.TierEconomy {
					spender = spend.ForBatch("team-b")
				}
				for range calls {
					_, err := spender.Reserve(ctx, model)
					require.NoError(t, err)
				}
				r = b.do(t, http.MethodGet, "/callers/me", "", "Authorization", "Bearer "+b.keyB)
				require.Equal(t, http.StatusOK, r.status, "%s", r.body)
				var me wire.CallerReport
				require.NoError(t, json.Unmarshal(r.body, &me))
				require.Equal(t, calls, me.Usage.ModelCalls)
				require.InDelta(t, estimate, me.Usage.CostUSD, 1.5e-6, // each rounded to the micro-dollar
					"a caller is charged what the dry run estimated")
			})
		}
	}
}
