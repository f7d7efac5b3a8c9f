package llm_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier/llm"
)

func TestDefaultPrices(t *testing.T) {
	t.Parallel()
	prices := llm.DefaultPrices()
	p, ok := prices.Lookup("gpt-5.4-mini")
	require.True(t, ok, "the service's default model has a price")
	require.NotEmpty(t, p.Source)
	_, ok = prices.Lookup("qwen3:8b")
	require.False(t, ok)
	for _, p := range prices {
		require.NotEmpty(t, p.Source, "%s says where its price comes from", p.Model)
	}

	file := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(file, []byte("models:\n  - {model: \"qwen3:*\", input: 0, output: 0, source: self-hosted}\n  - {model: gpt-5.4-mini, input: 9, output: 9, source: ours}\n"), 0o600))
	mine, err := llm.LoadPrices(file)
	require.NoError(t, err)
	p, ok = mine.Lookup("qwen3:8b")
	require.True(t, ok)
	require.Zero(t, p.Cost(1000, 1000))
	p, _ = mine.Lookup("gpt-5.4-mini")
	require.Equal(t, 9.0, p.Input, "the file's entries come first")

	require.NoError(t, os.WriteFile(file, []byte("models:\n  - {model: x, input: -1, output: 0, source: s}\n"), 0o600))
	_, err = llm.LoadPrices(file)
	require.ErrorContains(t, err, "negative")
}
