package llm

import (
	_ "embed"
	"fmt"
	"os"
	"path"

	"github.com/goccy/go-yaml"
)

//go:embed prices.yaml
var builtinPrices []byte

// Price is what a model costs, in US dollars per million tokens: an entry
// of the price table (prices.yaml, reviewed with the model settings here;
// the eval report prices its candidates with it too).
type Price struct {
	// Model is a model name or a glob (path.Match) such as "qwen3:*".
	Model  string  `yaml:"model" json:"model"`
	Input  float64 `yaml:"input" json:"input_per_million"`
	Output float64 `yaml:"output" json:"output_per_million"`
	// BatchInput and BatchOutput are the Batch API's prices; both 0 when
	// the table has none (the standard ones apply).
	BatchInput  float64 `yaml:"batch_input" json:"batch_input_per_million,omitempty"`
	BatchOutput float64 `yaml:"batch_output" json:"batch_output_per_million,omitempty"`
	// Source says where the numbers come from.
	Source string `yaml:"source" json:"source"`
}

// Prices is a price table; the first entry that matches a model wins.
type Prices []Price

// DefaultPrices returns the reviewed table in prices.yaml.
func DefaultPrices() Prices {
	p, err := parsePrices(builtinPrices)
	if err != nil {
		panic(err) // the embedded file is checked by the tests
	}
	return p
}

// LoadPrices reads a price table from a YAML file shaped like prices.yaml
// and puts its entries before the built-in ones. It returns an error for a
// file that cannot be read or an entry without a model or with a negative
// price.
func LoadPrices(file string) (Prices, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the price table: %w", err)
	}
	p, err := parsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return append(p, DefaultPrices()...), nil
}

func parsePrices(b []byte) (Prices, error) {
	var doc struct {
		Models Prices `yaml:"models"`
	}
	if err := yaml.UnmarshalWithOptions(b, &doc, yaml.Strict()); err != nil {
		return nil, err
	}
	for i, p := range doc.Models {
		if p.Model == "" {
			return nil, fmt.Errorf("price %d has no model", i+1)
		}
		if _, err := path.Match(p.Model, ""); err != nil {
			return nil, fmt.Errorf("price %d: bad model pattern %q", i+1, p.Model)
		}
		if p.Input < 0 || p.Output < 0 || p.BatchInput < 0 || p.BatchOutput < 0 {
			return nil, fmt.Errorf("price of %s is negative", p.Model)
		}
	}
	return doc.Models, nil
}

// Lookup returns the price of model, and false when the table has none.
func (ps Prices) Lookup(model string) (Price, bool) {
	for _, p := range ps {
		if ok, _ := path.Match(p.Model, model); ok {
			return p, true
		}
	}
	return Price{}, false
}

// Price is what promptTokens and completionTokens of model cost in US
// dollars (means, for an estimate), at the Batch API's price when batch;
// ok is false for a model the table does not list. Its method value is the
// deployment's Pricer, which CallCost applies.
func (ps Prices) Price(model string, promptTokens, completionTokens float64, batch bool) (usd float64, ok bool) {
	p, ok := ps.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.cost(promptTokens, completionTokens, batch), true
}

// Cost is the price of the given tokens in US dollars.
func (p Price) Cost(promptTokens, completionTokens int) float64 {
	return p.cost(float64(promptTokens), float64(completionTokens), false)
}

// cost is the one formula: dollars per million tokens, the batch prices
// when batch and the table has them.
func (p Price) cost(promptTokens, completionTokens float64, batch bool) float64 {
	in, out := p.Input, p.Output
	if batch && (p.BatchInput != 0 || p.BatchOutput != 0) {
		in, out = p.BatchInput, p.BatchOutput
	}
	return (promptTokens*in + completionTokens*out) / 1e6
}
