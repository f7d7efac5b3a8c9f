package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/wire"
)

// TestEstimateAndSpendAgree: a dry run prices each fresh domain at what a
// caller's spend is charged for the same model and tokens, so that a list
// the estimate says fits a spend budget fits it (issue 24: "priced with
// the same table the dry run uses"; issue 23, item 8: one price function).
func TestEstimateAndSpendAgree(t *testing.T) {
	t.Parallel()
	const model = "gpt-5.4-mini"
	// Every answer of the fake model is llmtest.Answer's 120 prompt and 25
	// completion tokens, so the dry run's mean tokens are those too.
	e := newE2E(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer(true, 4, "x") },
		map[string]string{"AUTH": "on", "OPENAI_MODEL": model})
	e.start(cli.RoleAll)
	a := as{e, e.apiKey("team-a")}

	status, id, p := a.list("", numbered("paid", 4))
	require.Equal(t, http.StatusAccepted, status, p.Detail)
	a.waitList(id)
	me := a.me()
	require.Equal(t, 4, me.Usage.ModelCalls)
	charged := me.Usage.CostUSD / 4
	price, ok := llm.DefaultPrices().Lookup(model)
	require.True(t, ok, "the price table lists %s", model)
	require.InDelta(t, price.Cost(120, 25), charged, 1e-9, "a call is charged at the table's price of its tokens")

	status, b := a.do(http.MethodPost, "/lists?dry_run=true", "text/plain", strings.Join(numbered("fresh", 10), "\n"))
	require.Equal(t, http.StatusOK, status, "%s", b)
	var est wire.ListEstimate
	require.NoError(t, json.Unmarshal(b, &est))
	require.Equal(t, 10, est.LLM)
	require.NotNil(t, est.EstimatedCostUSD, "%s", b)
	require.InDelta(t, 10*charged, *est.EstimatedCostUSD, 1e-6, // the estimate is rounded to the micro-dollar
		"the dry run prices 10 fresh domains at 10 calls as the spend budget charges them")
}
