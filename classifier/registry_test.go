package classifier

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestDefaultRegistry(t *testing.T) {
	t.Parallel()
	r := DefaultRegistry()
	require.Equal(t, []string{"b2b_software", "cpg"}, r.Names())

	c, err := r.Get("cpg")
	require.NoError(t, err)
	require.Equal(t, "is_cpg", c.AnswerField)
	require.Contains(t, c.Bias, "yes-leaning")
	p, err := c.Prompt("")
	require.NoError(t, err)
	require.Equal(t, c.CurrentPrompt, p.Version)
	require.NotEmpty(t, p.Notes, "a prompt's reasons are written down")

	withEvidence, err := p.Render(PromptData{Domain: "acme.com", Provider: "homepage", Evidence: "Title: Acme chips"})
	require.NoError(t, err)
	require.Contains(t, withEvidence, "Domain: acme.com\nEvidence from homepage:\nTitle: Acme chips")
	without, err := p.Render(PromptData{Domain: "acme.com"})
	require.NoError(t, err)
	require.Contains(t, without, "No web evidence is available")

	b2b, err := r.Get("b2b_software")
	require.NoError(t, err, "the second classifier is a YAML file alone")
	require.Equal(t, "is_b2b_software", b2b.AnswerField)
	require.Equal(t, "is_b2b_software", r.AnswerField("b2b_software"))
	require.Contains(t, b2b.ResponseSchema()["required"], "is_b2b_software")

	_, err = r.Get("b2b")
	var unknown *UnknownClassifierError
	require.ErrorAs(t, err, &unknown)
	require.Equal(t, []string{"b2b_software", "cpg"}, unknown.Valid)
	require.Equal(t, `unknown classifier "b2b"; valid classifiers: b2b_software, cpg`, err.Error())
	_, err = c.Prompt("v999")
	require.ErrorContains(t, err, `classifier "cpg" has no prompt version "v999" (have v1, v2, v3)`)
}

func TestNewRegistry_RejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"missing answer field": "name: x\nprompts: [{version: v1, system: s, user: u}]\ncurrent_prompt: v1\n",
		"no prompts":           "name: x\nanswer_field: is_x\ncurrent_prompt: v1\n",
		"bad template":         "name: x\nanswer_field: is_x\ncurrent_prompt: v1\nprompts: [{version: v1, system: s, user: '{{.Nope'}]\n",
		"unknown current":      "name: x\nanswer_field: is_x\ncurrent_prompt: v2\nprompts: [{version: v1, system: s, user: u}]\n",
		"unknown key":          "name: x\nanswer_field: is_x\ncurrent_prompt: v1\ntypo: 1\nprompts: [{version: v1, system: s, user: u}]\n",
		// The answer field is a JSON key and a CSV column beside the
		// result's own: a yes/no named is_..., never one of theirs.
		"answer field is a result key": "name: x\nanswer_field: confidence\ncurrent_prompt: v1\nprompts: [{version: v1, system: s, user: u}]\n",
		"answer field is answer":       "name: x\nanswer_field: answer\ncurrent_prompt: v1\nprompts: [{version: v1, system: s, user: u}]\n",
		"answer field needs escaping":  "name: x\nanswer_field: 'is_\"x'\ncurrent_prompt: v1\nprompts: [{version: v1, system: s, user: u}]\n",
	} {
		_, err := NewRegistry(fstest.MapFS{"x.yaml": {Data: []byte(body)}})
		require.Error(t, err, name)
	}
}

func TestRegistry_AnswerField(t *testing.T) {
	t.Parallel()
	r, err := NewRegistry(fstest.MapFS{"x.yaml": {Data: []byte(
		"name: x\nanswer_field: is_x\ncurrent_prompt: v1\nprompts: [{version: v1, system: s, user: u}]\n")}})
	require.NoError(t, err)
	require.Equal(t, "is_x", r.AnswerField("x"))
	require.Empty(t, r.AnswerField("gone"), "a classifier no longer defined has no field of its own")
}
