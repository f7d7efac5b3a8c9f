package wire_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/wire"
)

// TestAnswerVocabulary: every answer carries the generic "answer", and
// beside it the classifier's own answer field (is_cpg for cpg), so a
// caller of cpg keeps its key and another classifier answers in its own.
func TestAnswerVocabulary(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	yes := classifier.Result{Domain: "acme.com", Status: classifier.StatusCompleted, Answer: true, Confidence: 4,
		Reasoning: "Sells software to companies.", Source: classifier.SourceLLM, ClassifiedAt: at}
	failed := classifier.Result{Domain: "gone.com", Status: classifier.StatusFailed, Error: "no LLM configured"}
	job := &classifier.Job{Classifier: "b2b_software", Status: classifier.StatusCompleted, CreatedAt: at,
		Domains: []classifier.JobDomain{{Result: yes}, {Result: failed}}}

	decode := func(v any) map[string]any {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	t.Run("JobReport", func(t *testing.T) {
		t.Parallel()
		rep := decode(wire.NewJobReport(job, "is_b2b_software"))
		results := rep["results"].([]any)
		answered, notAnswered := results[0].(map[string]any), results[1].(map[string]any)
		require.Equal(t, true, answered["answer"])
		require.Equal(t, true, answered["is_b2b_software"])
		require.NotContains(t, answered, "is_cpg")
		require.NotContains(t, notAnswered, "answer", "only a COMPLETED result has an answer")
		require.NotContains(t, notAnswered, "is_b2b_software")

		cpg := decode(wire.NewResultReport(yes, "is_cpg"))
		require.Equal(t, true, cpg["is_cpg"], "cpg's callers keep their key")
		require.Equal(t, true, cpg["answer"])

		gone := decode(wire.NewResultReport(yes, ""))
		require.Equal(t, true, gone["answer"], "a classifier no longer defined still shows its answers")
		require.Len(t, gone, len(cpg)-1)
	})
	t.Run("ListRow", func(t *testing.T) {
		t.Parallel()
		row := wire.NewListRow(&classifier.ListRow{Row: 1, Input: "https://acme.com", Result: yes}, "is_b2b_software")
		line := decode(row)
		require.Equal(t, true, line["answer"])
		require.Equal(t, true, line["is_b2b_software"])
		require.NotContains(t, line, "is_cpg")

		header := wire.ListRowColumns("is_b2b_software")
		record := row.CSV(nil)
		require.Len(t, record, len(header))
		cells := map[string]string{}
		for i, col := range header {
			cells[col] = record[i]
		}
		require.Equal(t, "true", cells["is_b2b_software"])
		require.Equal(t, "true", cells["answer"])
		require.NotContains(t, header, "is_cpg")

		cpg := wire.ListRowColumns("is_cpg")
		require.Equal(t, []string{"row", "input", "ref", "domain", "status", "is_cpg", "confidence", "reasoning", "source",
			"classified_at", "error", "model", "prompt_version", "evidence_urls"}, cpg[:14],
			"cpg's columns stay where readers by position find them")
		require.Equal(t, "answer", cpg[len(cpg)-1])
		require.Equal(t, "answer", wire.ListRowColumns("")[5], "no duplicate header for a classifier no longer defined")
		require.Len(t, wire.ListRowColumns(""), 14)
		gone := wire.NewListRow(&classifier.ListRow{Row: 1, Result: yes}, "")
		require.Len(t, gone.CSV(nil), 14)
	})
	// Issue 36: a rejected row's reason was "reason" in the upload's
	// rejected_sample and a problem's errors, but "error" in the results.
	t.Run("ARejectedRowsReasonIsReason", func(t *testing.T) {
		t.Parallel()
		rejected := &classifier.ListRow{Row: 2, Input: "10.0.0.1",
			Result: classifier.Result{Status: classifier.StatusRejected, Error: classifier.ReasonIPAddress}}
		line := decode(wire.NewListRow(rejected, "is_cpg"))
		require.Equal(t, classifier.ReasonIPAddress, line["reason"])
		require.Equal(t, classifier.ReasonIPAddress, line["error"], "under its deprecated name too, for one release")
		row := wire.NewListRow(rejected, "is_cpg")
		cells := map[string]string{}
		for i, col := range wire.ListRowColumns("is_cpg") {
			cells[col] = row.CSV(nil)[i]
		}
		require.Equal(t, classifier.ReasonIPAddress, cells["error"], "the CSV's columns do not move: the reason stays in error")
		failed := decode(wire.NewListRow(&classifier.ListRow{Row: 3, Input: "a.com",
			Result: classifier.Result{Domain: "a.com", Status: classifier.StatusFailed, Error: "no LLM configured"}}, "is_cpg"))
		require.Equal(t, "no LLM configured", failed["error"])
		require.NotContains(t, failed, "reason", "a FAILED row has an error, not a reason")
	})
}

// TestListRow_NDJSONKeepsText: a row streamed by an encoder that does not
// escape HTML shows the input as uploaded, as before answers had two keys.
func TestListRow_NDJSONKeepsText(t *testing.T) {
	t.Parallel()
	row := wire.NewListRow(&classifier.ListRow{Row: 1, Input: "a&b <c>", Result: classifier.Result{Status: classifier.StatusRejected}}, "is_cpg")
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(row))
	require.Contains(t, b.String(), `"input":"a&b <c>"`)
	escaped, err := json.Marshal(row)
	require.NoError(t, err)
	require.Contains(t, string(escaped), `"input":"a\u0026b \u003cc\u003e"`, "json.Marshal escapes as it always did")
}
