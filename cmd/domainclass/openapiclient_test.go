package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm/llmtest"
	"github.com/domainclass/domainclass/cli"
	"github.com/domainclass/domainclass/db/dbtest"
	"github.com/domainclass/domainclass/internal/openapiclient"
	"github.com/domainclass/domainclass/wire"
)

// TestGeneratedClient is a caller's day with the client oapi-codegen
// generates from /openapi.yaml (internal/openapiclient), against the real
// service: a job and a list submitted with an Idempotency-Key and replayed,
// polled to COMPLETED, the list's rows downloaded, refusals read as typed
// problems, and each webhook read into its generated type.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	hold := holdDomain("slow.com")
	e := newE2E(t, func(r llmtest.Request) llmtest.Reply {
		if r.Domain == "slow.com" {
			return hold.reply(r)
		}
		return llmtest.Answer(r.Domain != "crm.io", 4, "Sells "+r.Domain+" goods.")
	}, map[string]string{"AUTH": "on", "WEBHOOK_SECRET": newWebhookSecret(t), "CALLBACK_ALLOW_PRIVATE": "true"})
	e.start(cli.RoleAll)
	key := e.apiKey("team-generated")
	hooks := newHookReceiver(t)
	callback := hooks.srv.URL + "/hooks/domainclass"
	ctx := context.Background()

	bearer := openapiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+key)
		return nil
	})
	client, err := openapiclient.NewClientWithResponses(e.api.APIURL(), bearer)
	require.NoError(t, err)
	accept := func(mediaType string) openapiclient.RequestEditorFn {
		return func(_ context.Context, req *http.Request) error {
			req.Header.Set("Accept", mediaType)
			return nil
		}
	}

	t.Run("Job", func(t *testing.T) {
		idempotencyKey := `"generated-job-1"`
		params := &openapiclient.CreateClassifyJobParams{IdempotencyKey: &idempotencyKey, XCallbackURL: &callback}
		body := openapiclient.ClassifyRequest{Domains: []string{"https://www.Acme-Snacks.com/about", "crm.io"}}
		created, err := client.CreateClassifyJobWithResponse(ctx, params, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, created.StatusCode(), "%s", created.Body)
		job := created.JSON202
		require.Equal(t, openapiclient.AcceptedStatusPENDING, job.Status)
		require.Equal(t, "/domains/classify/"+job.JobId.String(), created.Headers202.Location)
		require.Equal(t, []openapiclient.DomainInput{
			{Input: "https://www.Acme-Snacks.com/about", Domain: "acme-snacks.com"}, {Input: "crm.io", Domain: "crm.io"}}, job.Domains)

		replayed, err := client.CreateClassifyJobWithResponse(ctx, params, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, replayed.StatusCode(), "%s", replayed.Body)
		require.Equal(t, job.JobId, replayed.JSON202.JobId, "the same key and body: the same job")
		require.NotNil(t, replayed.Headers202.IdempotentReplayed)
		require.Equal(t, "true", *replayed.Headers202.IdempotentReplayed)

		var report *openapiclient.JobReport
		require.Eventually(t, func() bool {
			got, err := client.GetClassifyJobWithResponse(ctx, job.JobId)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, got.StatusCode(), "%s", got.Body)
			report = got.JSON200
			return report.Status == openapiclient.JobStatusCOMPLETED
		}, dbtest.Patience(), 25*time.Millisecond, "the job completes")
		require.NotNil(t, report.CompletedAt)
		require.Equal(t, openapiclient.JobProgress{Total: 2, Done: 2}, report.Progress)
		acme, crm := report.Results[0], report.Results[1]
		require.Equal(t, "acme-snacks.com", acme.Domain)
		require.Equal(t, openapiclient.ResultStatusCOMPLETED, acme.Status)
		require.True(t, *acme.IsCpg)
		require.Equal(t, 4, *acme.Confidence)
		require.Equal(t, "Sells acme-snacks.com goods.", *acme.Reasoning)
		require.Equal(t, openapiclient.Llm, *acme.Source)
		require.False(t, *crm.IsCpg)

		// The webhook, read into its generated type: every field it
		// carries is one the type knows.
		var delivery hookDelivery
		require.Eventually(t, func() bool {
			got := hooks.forJob(job.JobId.String())
			if len(got) > 0 {
				delivery = got[0]
			}
			return len(got) > 0
		}, dbtest.Patience(), 25*time.Millisecond, "the job's webhook arrives")
		var payload openapiclient.WebhookPayload
		requireDecodesStrictly(t, delivery.body, &payload)
		require.Equal(t, openapiclient.ClassificationCompleted, payload.Type)
		require.Equal(t, job.JobId, payload.JobId)
		require.Equal(t, openapiclient.JobEndStatusCOMPLETED, payload.Status)
		require.Equal(t, report.Results, payload.Results, "the delivery holds what GET shows")
	})

	t.Run("JobRefusals", func(t *testing.T) {
		invalid, err := client.CreateClassifyJobWithResponse(ctx, nil, openapiclient.ClassifyRequest{Domains: []string{"10.0.0.1", "acme.com", "x"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, invalid.StatusCode())
		problem := invalid.ApplicationproblemJSON422
		require.NotNil(t, problem, "a 422 reads into the generated Problem: %s", invalid.Body)
		require.Equal(t, "/problems/invalid-domains", problem.Type)
		require.Equal(t, http.StatusUnprocessableEntity, problem.Status)
		require.NotNil(t, problem.Errors)
		require.Equal(t, []string{"10.0.0.1", "x"}, []string{(*problem.Errors)[0].Input, (*problem.Errors)[1].Input})
		require.Contains(t, (*problem.Errors)[0].Reason, "IP address")

		missing, err := client.GetClassifyJobWithResponse(ctx, uuid.New())
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, missing.StatusCode())
		require.Equal(t, "/problems/not-found", missing.ApplicationproblemJSON404.Type)

		anonymous, err := openapiclient.NewClientWithResponses(e.api.APIURL())
		require.NoError(t, err)
		refused, err := anonymous.GetClassifyJobWithResponse(ctx, uuid.New())
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, refused.StatusCode())
		require.Equal(t, "/problems/unauthorized", refused.ApplicationproblemJSON401.Type)
		require.True(t, strings.HasPrefix(refused.Headers401.WWWAuthenticate, "Bearer "), refused.Headers401.WWWAuthenticate)
	})

	t.Run("List", func(t *testing.T) {
		const upload = "company,domain,ref\nAcme,https://www.acme.com/,crm-1\nBeta,beta.com,crm-2\nAcme again,acme.com,crm-3\nRouter,10.0.0.1,crm-4\n"
		idempotencyKey := `"generated-list-1"`
		params := &openapiclient.CreateListParams{IdempotencyKey: &idempotencyKey, XCallbackURL: &callback}

		dryRun := true
		estimated, err := client.CreateListWithBodyWithResponse(ctx, &openapiclient.CreateListParams{DryRun: &dryRun}, "text/csv", strings.NewReader(upload))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, estimated.StatusCode(), "%s", estimated.Body)
		require.Equal(t, 4, estimated.JSON200.Rows)
		require.Equal(t, 2, estimated.JSON200.Llm, "acme.com and beta.com need the model")
		require.Equal(t, "test-model", estimated.JSON200.Model)

		created, err := client.CreateListWithBodyWithResponse(ctx, params, "text/csv", strings.NewReader(upload))
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, created.StatusCode(), "%s", created.Body)
		list := created.JSON202
		require.Equal(t, openapiclient.ListAcceptedStatusPENDING, list.Status)
		require.Equal(t, "/lists/"+list.ListId.String(), created.Headers202.Location)
		require.Equal(t, []int{4, 2, 1, 1}, []int{list.Rows, list.Domains, list.Duplicates, list.Rejected})
		require.Equal(t, []openapiclient.RejectedRow{{Row: 4, Input: "10.0.0.1", Reason: list.RejectedSample[0].Reason}}, list.RejectedSample)

		replayed, err := client.CreateListWithBodyWithResponse(ctx, params, "text/csv", strings.NewReader(upload))
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, replayed.StatusCode(), "%s", replayed.Body)
		require.Equal(t, list.ListId, replayed.JSON202.ListId, "the same key and body: the same list")
		require.Equal(t, "true", *replayed.Headers202.IdempotentReplayed)

		var status *openapiclient.ListReport
		require.Eventually(t, func() bool {
			got, err := client.GetListWithResponse(ctx, list.ListId)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, got.StatusCode(), "%s", got.Body)
			status = got.JSON200
			return status.Status == openapiclient.ListStatusCOMPLETED
		}, dbtest.Patience(), 25*time.Millisecond, "the list completes")
		require.Equal(t, openapiclient.ListProgress{Done: 4, Total: 4, Completed: 3, Rejected: 1, Llm: 3}, status.Progress,
			"a duplicate row counts with the answer it shares")

		// The rows as NDJSON, each line read into the generated ListRow.
		ndjson, err := client.GetListResultsWithResponse(ctx, list.ListId, nil, accept("application/x-ndjson"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, ndjson.StatusCode(), "%s", ndjson.Body)
		var rows []openapiclient.ListRow
		lines := bufio.NewScanner(bytes.NewReader(ndjson.Body))
		for lines.Scan() {
			var row openapiclient.ListRow
			requireDecodesStrictly(t, lines.Bytes(), &row)
			rows = append(rows, row)
		}
		require.Len(t, rows, 4)
		for i, ref := range []string{"crm-1", "crm-2", "crm-3", "crm-4"} {
			require.Equal(t, i+1, rows[i].Row)
			require.Equal(t, ref, *rows[i].Ref)
		}
		require.Equal(t, openapiclient.ListRowStatusCOMPLETED, rows[2].Status)
		require.Equal(t, "acme.com", *rows[2].Domain)
		require.True(t, *rows[2].IsCpg)
		require.Equal(t, openapiclient.ListRowStatusREJECTED, rows[3].Status)
		require.Nil(t, rows[3].Domain)

		// The default CSV, filtered by status as the generated client
		// writes the parameter (?status=rejected: any case).
		rejected := []string{"rejected"}
		csvRows, err := client.GetListResultsWithResponse(ctx, list.ListId, &openapiclient.GetListResultsParams{Status: &rejected})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, csvRows.StatusCode(), "%s", csvRows.Body)
		records, err := csv.NewReader(bytes.NewReader(csvRows.Body)).ReadAll()
		require.NoError(t, err)
		require.Equal(t, wire.ListRowColumns("is_cpg"), records[0])
		require.Len(t, records, 2, "the header and the one REJECTED row")
		require.Equal(t, []string{"4", "10.0.0.1", "crm-4", "", "REJECTED"}, records[1][:5])

		var delivery hookDelivery
		require.Eventually(t, func() bool {
			for _, d := range hooks.forList(list.ListId.String()) {
				delivery = d
				return true
			}
			return false
		}, dbtest.Patience(), 25*time.Millisecond, "the list's webhook arrives")
		var payload openapiclient.ListWebhookPayload
		requireDecodesStrictly(t, delivery.body, &payload)
		require.Equal(t, openapiclient.ListCompleted, payload.Type)
		require.Equal(t, openapiclient.ListEndStatusCOMPLETED, payload.Status)
		require.Equal(t, status.Progress, payload.Progress)
	})

	t.Run("ListCancelAndRefusals", func(t *testing.T) {
		created, err := client.CreateListWithTextBodyWithResponse(ctx, &openapiclient.CreateListParams{}, "slow.com\nother.com\n")
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, created.StatusCode(), "%s", created.Body)
		id := created.JSON202.ListId
		require.Eventually(t, func() bool { return e.llm.Calls("slow.com") == 1 }, dbtest.Patience(), 25*time.Millisecond,
			"the list is being worked on")
		cancelled, err := client.CancelListWithResponse(ctx, id)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, cancelled.StatusCode(), "%s", cancelled.Body)
		require.Equal(t, openapiclient.ListStatusCANCELLED, cancelled.JSON200.Status)
		hold.letGo()

		wrongType, err := client.CreateListWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"domains": ["a.com"]}`))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnsupportedMediaType, wrongType.StatusCode())
		require.Equal(t, "/problems/unsupported-media-type", wrongType.ApplicationproblemJSON415.Type)

		missing, err := client.GetListWithResponse(ctx, uuid.New())
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, missing.StatusCode())
		require.Equal(t, "/problems/not-found", missing.ApplicationproblemJSON404.Type)

		notAcceptable, err := client.GetListResultsWithResponse(ctx, id, nil, accept("application/json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusNotAcceptable, notAcceptable.StatusCode())
		require.Equal(t, "/problems/not-acceptable", notAcceptable.ApplicationproblemJSON406.Type)
	})
}

// requireDecodesStrictly decodes a JSON document into a generated type,
// refusing any field the type does not have.
func requireDecodesStrictly(t *testing.T, doc []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", doc)
}
