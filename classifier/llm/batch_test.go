package llm_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/classifier/llm"
	"github.com/domainclass/domainclass/classifier/llm/llmtest"
)

// jsonl is a batch input file asking about domains.
func jsonl(t *testing.T, c *llm.Client, domains ...string) *bytes.Reader {
	t.Helper()
	var b bytes.Buffer
	for _, d := range domains {
		line, err := c.BatchLine(d, request(d))
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return bytes.NewReader(b.Bytes())
}

// follow reads a batch until it ends and returns every status it went
// through.
func follow(t *testing.T, c *llm.Client, b llm.BatchStatus) (llm.BatchStatus, []string) {
	t.Helper()
	seen := []string{b.Status}
	for i := 0; b.Running(); i++ {
		require.Less(t, i, 10, "the batch never ended: %v", seen)
		var err error
		b, err = c.BatchGet(context.Background(), b.ID)
		require.NoError(t, err)
		seen = append(seen, b.Status)
	}
	return b, seen
}

func results(t *testing.T, c *llm.Client, b llm.BatchStatus) map[string]llm.BatchResult {
	t.Helper()
	got := map[string]llm.BatchResult{}
	require.NoError(t, c.BatchResults(context.Background(), b, func(r llm.BatchResult) error {
		got[r.CustomID] = r
		return nil
	}))
	return got
}

func TestClient_Batch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CompletedWithAnswersAndPerRequestFailures", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(r llmtest.Request) llmtest.Reply {
			switch r.Domain {
			case "bad.com":
				return llmtest.Status(http.StatusBadRequest, nil)
			case "garbled.com":
				return llmtest.Reply{Content: "I think maybe yes"}
			}
			return llmtest.Answer(true, 4, "Snacks.")
		})
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "acme.com", "bad.com", "garbled.com"), "our-1")
		require.NoError(t, err)
		require.Equal(t, 0, srv.Total(), "nothing is asked before the batch runs")
		b, seen := follow(t, c, b)
		require.Equal(t, []string{"validating", "in_progress", "finalizing", "completed"}, seen)
		require.Equal(t, 3, b.Total)
		require.Equal(t, 2, b.Completed)
		require.Equal(t, 1, b.Failed)

		got := results(t, c, b)
		require.Len(t, got, 3)
		require.NoError(t, got["acme.com"].Err)
		v, err := classifier.ParseVerdict(got["acme.com"].Response.Content, "is_cpg")
		require.NoError(t, err)
		require.True(t, v.Answer)
		require.Equal(t, 120, got["acme.com"].Response.PromptTokens)
		require.ErrorContains(t, got["bad.com"].Err, "status 400")
		require.NoError(t, got["garbled.com"].Err, "a readable line whose content is not a verdict is the parser's to judge")
		for _, r := range srv.Requests() {
			require.Equal(t, "json_schema", r.ResponseFormat, "the same response format as a call")
			require.Equal(t, "test-model", r.Model)
		}
		require.Equal(t, 1, srv.Calls("acme.com"))
	})

	t.Run("FailedAsAWhole", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Steady(true, 4, "x", 0))
		srv.Batch.End, srv.Batch.FailCode, srv.Batch.FailMessage = "failed", "token_limit_exceeded", "Enqueued token limit reached."
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "acme.com"), "our-2")
		require.NoError(t, err)
		b, seen := follow(t, c, b)
		require.Equal(t, []string{"validating", "in_progress", "finalizing", "failed"}, seen)
		require.Equal(t, "token_limit_exceeded: Enqueued token limit reached.", b.Error)
		require.Empty(t, results(t, c, b))
		require.Equal(t, 0, srv.Total())
	})

	t.Run("ExpiredWithPartOfItsAnswers", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Steady(true, 4, "x", 0))
		srv.Batch.End, srv.Batch.ExpireAfter = "expired", 1
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "a.com", "b.com", "c.com"), "our-3")
		require.NoError(t, err)
		b, _ = follow(t, c, b)
		require.Equal(t, "expired", b.Status)
		got := results(t, c, b)
		require.NoError(t, got["a.com"].Err)
		require.ErrorContains(t, got["b.com"].Err, "batch_expired")
		require.ErrorContains(t, got["c.com"].Err, "batch_expired")
	})

	t.Run("CancelledWhileInProgress", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Steady(true, 4, "x", 0))
		hold := make(chan struct{})
		srv.Batch.Hold = hold
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "a.com"), "our-4")
		require.NoError(t, err)
		for range 3 {
			b, err = c.BatchGet(ctx, b.ID)
			require.NoError(t, err)
		}
		require.Equal(t, "in_progress", b.Status, "held")
		b, err = c.BatchCancel(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, "cancelling", b.Status)
		b, _ = follow(t, c, b)
		require.Equal(t, "cancelled", b.Status)
		require.Equal(t, 0, srv.Total())
		_, err = c.BatchCancel(ctx, b.ID)
		var rejected *llm.RejectedError
		require.ErrorAs(t, err, &rejected, "an ended batch cannot be cancelled")
	})

	t.Run("InvalidInputFailsValidation", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Steady(true, 4, "x", 0))
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "a.com", "a.com"), "our-5")
		require.NoError(t, err)
		b, seen := follow(t, c, b)
		require.Equal(t, []string{"validating", "failed"}, seen)
		require.Contains(t, b.Error, "duplicate_custom_id")
	})

	t.Run("FindsItsBatchAgainByKey", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, llmtest.Steady(true, 4, "x", 0))
		c := newClient(t, srv, "")
		made, err := c.BatchSubmit(ctx, jsonl(t, c, "a.com"), "our-6")
		require.NoError(t, err)
		_, err = c.BatchSubmit(ctx, jsonl(t, c, "b.com"), "someone-else")
		require.NoError(t, err)
		found, ok, err := c.BatchFind(ctx, "our-6")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, made.ID, found.ID)
		_, ok, err = c.BatchFind(ctx, "never-made")
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("UnreadableOutputLineIsAnError", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.New(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Raw: "<html>oops</html>"} })
		c := newClient(t, srv, "")
		b, err := c.BatchSubmit(ctx, jsonl(t, c, "a.com"), "our-7")
		require.NoError(t, err)
		b, _ = follow(t, c, b)
		got := results(t, c, b)
		require.Error(t, got["a.com"].Err)
		require.True(t, strings.Contains(got["a.com"].Err.Error(), "unreadable"), got["a.com"].Err.Error())
	})
}
