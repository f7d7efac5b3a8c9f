package classifier

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVerdict(t *testing.T) {
	t.Parallel()

	yes4 := Verdict{Answer: true, Confidence: 4, Reasoning: "Makes snacks."}
	accepted := []struct {
		name, out string
		want      Verdict
	}{
		{"PlainJSON", `{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"Whitespace", "\n  {\"is_cpg\":true,\"confidence\":4,\"reasoning\":\"Makes snacks.\"}\n", yes4},
		{"FenceJSON", "```json\n{\"is_cpg\": true, \"confidence\": 4, \"reasoning\": \"Makes snacks.\"}\n```", yes4},
		{"FenceBare", "```\n{\"is_cpg\": true, \"confidence\": 4, \"reasoning\": \"Makes snacks.\"}\n```", yes4},
		{"ThinkClosed", `<think>Is it {CPG}? They sell {"is_cpg": false} chips.</think>{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"ThinkClosedUpperCase", "<THINK>hmm {</THINK>\n{\"is_cpg\": true, \"confidence\": 4, \"reasoning\": \"Makes snacks.\"}", yes4},
		{"ThinkTwoBlocks", `<think>a {</think><think>b }</think>{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"ThinkLoneClose", `The template opened it. {"is_cpg": false, "confidence": 1} so maybe</think>{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"ThinkUnclosed", `<think>Snack maker, clearly. {"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"ThinkInsideValidJSONString", `{"is_cpg": true, "confidence": 4, "reasoning": "<think> tags are fine here"}`,
			Verdict{Answer: true, Confidence: 4, Reasoning: "<think> tags are fine here"}},
		{"TrailingText", `{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."} Hope this helps! {`, yes4},
		{"LeadingText", `Sure, here you go: {"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"TwoObjectsFirstWins", `{"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}{"is_cpg": false, "confidence": 5, "reasoning": "No."}`, yes4},
		{"BracesInProseBefore", `Format {like this}: {"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"ObjectWithoutAnswerSkipped", `{"note": "x"} {"is_cpg": true, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"BracesInsideReasoningString", `{"is_cpg": true, "confidence": 4, "reasoning": "Brands {A} and {B}."}`,
			Verdict{Answer: true, Confidence: 4, Reasoning: "Brands {A} and {B}."}},
		{"ControlCharactersInReasoningFold", `{"is_cpg": true, "confidence": 4, "reasoning": "Makes\u001b[2J\u001b]0;pwned\u0007 snacks.\u0000"}`,
			Verdict{Answer: true, Confidence: 4, Reasoning: "Makes [2J ]0;pwned snacks."}},
		{"AnswerFalse", `{"is_cpg": false, "confidence": 5, "reasoning": "Software."}`, Verdict{false, 5, "Software."}},
		{"AnswerYesString", `{"is_cpg": "yes", "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"AnswerYesUpper", `{"is_cpg": "YES", "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"AnswerNoString", `{"is_cpg": "No", "confidence": 4, "reasoning": "Makes snacks."}`, Verdict{false, 4, "Makes snacks."}},
		{"AnswerTrueString", `{"is_cpg": "True", "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"AnswerOneNumber", `{"is_cpg": 1, "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"AnswerZeroNumber", `{"is_cpg": 0, "confidence": 4, "reasoning": "Makes snacks."}`, Verdict{false, 4, "Makes snacks."}},
		{"AnswerOneString", `{"is_cpg": "1", "confidence": 4, "reasoning": "Makes snacks."}`, yes4},
		{"AnswerZeroString", `{"is_cpg": " 0 ", "confidence": 4, "reasoning": "Makes snacks."}`, Verdict{false, 4, "Makes snacks."}},
		{"KeyCase", `{"IS_CPG": true, "Confidence": 4, "Reasoning": "Makes snacks."}`, yes4},
		{"ConfidenceString", `{"is_cpg": true, "confidence": "4", "reasoning": "Makes snacks."}`, yes4},
		{"ConfidenceFloat", `{"is_cpg": true, "confidence": 4.0, "reasoning": "Makes snacks."}`, yes4},
		{"ConfidenceFloatString", `{"is_cpg": true, "confidence": "4.0", "reasoning": "Makes snacks."}`, yes4},
		{"ReasoningFoldedToOneLine", "{\"is_cpg\": true, \"confidence\": 4, \"reasoning\": \"  Makes\\n\\n snacks.\\t\"}", yes4},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseVerdict(tt.out, "is_cpg")
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	rejected := []struct {
		name, out, reason string
	}{
		{"Empty", "   ", "empty output"},
		{"Prose", "Yes, this is a CPG company.", "no JSON object in output"},
		{"Truncated", `{"is_cpg": true, "confidence": 4, "reas`, `no complete JSON object with "is_cpg" (truncated or malformed)`},
		{"OnlyInsideThink", `<think>{"is_cpg": true, "confidence": 4, "reasoning": "x"}</think> I cannot decide.`, "no JSON object in output"},
		{"AnswerMaybe", `{"is_cpg": "maybe", "confidence": 3, "reasoning": "Unclear."}`, `is_cpg is not a clear yes or no: "maybe"`},
		{"AnswerNull", `{"is_cpg": null, "confidence": 3, "reasoning": "Unclear."}`, `is_cpg is not a clear yes or no: null`},
		{"AnswerTwo", `{"is_cpg": 2, "confidence": 3, "reasoning": "Unclear."}`, `is_cpg is not a clear yes or no: 2`},
		{"ConfidenceZero", `{"is_cpg": true, "confidence": 0, "reasoning": "x"}`, "confidence 0 is not an integer from 1 to 5"},
		{"ConfidenceSix", `{"is_cpg": true, "confidence": 6, "reasoning": "x"}`, "confidence 6 is not an integer from 1 to 5"},
		{"ConfidenceHalf", `{"is_cpg": true, "confidence": 3.5, "reasoning": "x"}`, "confidence 3.5 is not an integer from 1 to 5"},
		{"ConfidenceWord", `{"is_cpg": true, "confidence": "high", "reasoning": "x"}`, "confidence is not a number: high"},
		{"ConfidenceMissing", `{"is_cpg": true, "reasoning": "x"}`, "confidence is missing"},
		{"ReasoningEmpty", `{"is_cpg": true, "confidence": 4, "reasoning": "  \n "}`, "reasoning is empty"},
		{"ReasoningMissing", `{"is_cpg": true, "confidence": 4}`, "reasoning is missing or not a string"},
		{"ReasoningNotString", `{"is_cpg": true, "confidence": 4, "reasoning": ["a"]}`, "reasoning is missing or not a string"},
		{"WrongAnswerKey", `{"answer": true, "confidence": 4, "reasoning": "x"}`, `no complete JSON object with "is_cpg" (truncated or malformed)`},
	}
	for _, tt := range rejected {
		t.Run("Rejects"+tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseVerdict(tt.out, "is_cpg")
			var parseErr *ParseError
			require.True(t, errors.As(err, &parseErr), "want *ParseError, got %v", err)
			require.Equal(t, tt.reason, parseErr.Reason)
		})
	}

	t.Run("LongReasoningIsCut", func(t *testing.T) {
		t.Parallel()
		long := make([]byte, 2000)
		for i := range long {
			long[i] = 'a'
		}
		got, err := ParseVerdict(`{"is_cpg": true, "confidence": 4, "reasoning": "`+string(long)+`"}`, "is_cpg")
		require.NoError(t, err)
		require.Len(t, []rune(got.Reasoning), maxReasoningLength)
	})
}

func FuzzParseVerdict(f *testing.F) {
	for _, seed := range []string{
		`{"is_cpg": true, "confidence": 4, "reasoning": "x"}`,
		"```json\n{\"is_cpg\": \"no\", \"confidence\": \"2\", \"reasoning\": \"y\"}\n```",
		`<think>{</think>{"is_cpg": 1, "confidence": 5.0, "reasoning": "z"}`,
		`</think>{"is_cpg": 0}`, `{"is_cpg": true, "confidence": 4, "reas`, `<think>`, `{{{{`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, out string) {
		v, err := ParseVerdict(out, "is_cpg")
		if err != nil {
			var parseErr *ParseError
			if !errors.As(err, &parseErr) || parseErr.Reason == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if v.Confidence < 1 || v.Confidence > 5 || v.Reasoning == "" {
			t.Fatalf("accepted an invalid verdict %+v from %q", v, out)
		}
	})
}
