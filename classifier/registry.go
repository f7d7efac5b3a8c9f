package classifier

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"

	"github.com/goccy/go-yaml"
)

//go:embed classifiers/*.yaml
var builtinClassifiers embed.FS

// DefaultClassifier is used when a request names none.
const DefaultClassifier = "cpg"

// Classifier is one named yes/no question about companies, with versioned
// prompts. Classifiers are data: each is a YAML file in classifiers/.
type Classifier struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// AnswerField is the classifier's own name for its yes/no answer
	// (is_cpg): the key the model answers with, and the key and CSV column
	// that carry the answer to callers beside the generic "answer". It
	// matches answerFieldPattern, so it is never one of a result's other
	// keys and needs no escaping.
	AnswerField string `yaml:"answer_field"`
	// Bias notes which way the prompt leans when in doubt, and why.
	Bias          string   `yaml:"bias"`
	CurrentPrompt string   `yaml:"current_prompt"`
	Prompts       []Prompt `yaml:"prompts"`
}

// Prompt is one version of a classifier's instructions.
type Prompt struct {
	Version string `yaml:"version"`
	Notes   string `yaml:"notes"`
	System  string `yaml:"system"`
	User    string `yaml:"user"`

	user *template.Template
}

// PromptData is what a prompt's user template can use.
type PromptData struct {
	Domain   string
	Provider string
	Evidence string
}

// Prompt returns the prompt of the given version, or the current one for "".
// For an unknown version it returns an error that names the versions the
// classifier has.
func (c *Classifier) Prompt(version string) (*Prompt, error) {
	if version == "" {
		version = c.CurrentPrompt
	}
	for i := range c.Prompts {
		if c.Prompts[i].Version == version {
			return &c.Prompts[i], nil
		}
	}
	return nil, fmt.Errorf("classifier %q has no prompt version %q (have %s)", c.Name, version, strings.Join(c.PromptVersions(), ", "))
}

// PromptVersions lists the classifier's prompt versions in file order.
func (c *Classifier) PromptVersions() []string {
	versions := make([]string, len(c.Prompts))
	for i, p := range c.Prompts {
		versions[i] = p.Version
	}
	return versions
}

// Render fills the prompt's user template.
func (p *Prompt) Render(data PromptData) (string, error) {
	var b bytes.Buffer
	if err := p.user.Execute(&b, data); err != nil {
		return "", fmt.Errorf("error rendering prompt %s: %w", p.Version, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// ResponseSchema is the JSON schema the model is asked to follow. It uses
// only what strict structured-output modes accept.
func (c *Classifier) ResponseSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			c.AnswerField: map[string]any{"type": "boolean"},
			"confidence":  map[string]any{"type": "integer", "enum": []int{1, 2, 3, 4, 5}},
			"reasoning":   map[string]any{"type": "string"},
		},
		"required":             []string{c.AnswerField, "confidence", "reasoning"},
		"additionalProperties": false,
	}
}

// Registry holds the known classifiers by name.
type Registry struct {
	byName map[string]*Classifier
}

// NewRegistry loads every *.yaml file at the top of fsys. It returns an error
// naming the file for a definition that is incomplete or a duplicate.
func NewRegistry(fsys fs.FS) (*Registry, error) {
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	r := &Registry{byName: make(map[string]*Classifier)}
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		c := new(Classifier)
		if err := yaml.UnmarshalWithOptions(b, c, yaml.Strict()); err != nil {
			return nil, fmt.Errorf("classifier %s: %w", name, err)
		}
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("classifier %s: %w", name, err)
		}
		if _, dup := r.byName[c.Name]; dup {
			return nil, fmt.Errorf("classifier %s: name %q is defined twice", name, c.Name)
		}
		r.byName[c.Name] = c
	}
	return r, nil
}

// DefaultRegistry returns the classifiers built into the binary, read
// once: a Registry is not changed after NewRegistry, so callers share it.
func DefaultRegistry() *Registry { return defaultRegistry() }

var defaultRegistry = sync.OnceValue(func() *Registry {
	sub, err := fs.Sub(builtinClassifiers, "classifiers")
	if err != nil {
		panic(err)
	}
	r, err := NewRegistry(sub)
	if err != nil {
		panic(err) // the embedded files are checked by the tests
	}
	return r
})

// Get returns the classifier with the given name, or an
// *UnknownClassifierError that lists the valid names.
func (r *Registry) Get(name string) (*Classifier, error) {
	if c, ok := r.byName[name]; ok {
		return c, nil
	}
	return nil, &UnknownClassifierError{Name: name, Valid: r.Names()}
}

// UnknownClassifierError is the error of a classifier name that is not in
// the registry.
type UnknownClassifierError struct {
	Name  string
	Valid []string // the registry's names, sorted
}

func (e *UnknownClassifierError) Error() string {
	return fmt.Sprintf("unknown classifier %q; valid classifiers: %s", e.Name, strings.Join(e.Valid, ", "))
}

// AnswerField returns the answer field of the named classifier; "" for a
// name not in the registry (a classifier removed since its answers were
// made), whose answers are shown under the generic "answer" alone.
func (r *Registry) AnswerField(name string) string {
	if c, ok := r.byName[name]; ok {
		return c.AnswerField
	}
	return ""
}

// answerFieldPattern is what an answer field may be: a yes/no named
// is_something, in lower case.
var answerFieldPattern = regexp.MustCompile(`^is_[a-z0-9_]+$`)

// Names returns the classifier names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (c *Classifier) validate() error {
	switch {
	case c.Name == "" || strings.ContainsAny(c.Name, " /"):
		return fmt.Errorf("name %q must be a non-empty word", c.Name)
	case c.AnswerField == "":
		return fmt.Errorf("answer_field is required")
	case !answerFieldPattern.MatchString(c.AnswerField):
		return fmt.Errorf("answer_field %q must match %s (is_ and lower-case letters, digits or _)", c.AnswerField, answerFieldPattern)
	case len(c.Prompts) == 0:
		return fmt.Errorf("at least one prompt is required")
	}
	for i := range c.Prompts {
		p := &c.Prompts[i]
		if p.Version == "" || strings.TrimSpace(p.System) == "" || strings.TrimSpace(p.User) == "" {
			return fmt.Errorf("prompt %d needs version, system and user", i)
		}
		t, err := template.New(path.Join(c.Name, p.Version)).Option("missingkey=error").Parse(p.User)
		if err != nil {
			return fmt.Errorf("prompt %s: %w", p.Version, err)
		}
		p.user = t
	}
	if _, err := c.Prompt(""); err != nil {
		return fmt.Errorf("current_prompt: %w", err)
	}
	return nil
}
