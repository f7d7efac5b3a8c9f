package cli

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/evals"
)

// importSetBy is who set the overrides `override import` makes: the name
// the command had when it loaded the known-companies list of old, kept in
// the answers' provenance (set_by) so that callers see one name for them.
const importSetBy = "known import"

// overrideImport is `override import` (and `known import`, its first
// name, for the scripts that call it): it sets a yes override (confidence
// 5) for each company of the file, by importSetBy, with a note naming the
// company.
type overrideImport struct {
	*base
	invocation
	classifierName string
}

func (c *base) overrideImportCommand() *cobra.Command {
	o := &overrideImport{base: c}
	cmd := &cobra.Command{
		Use:   "import FILE.csv",
		Short: "load a list of companies as yes overrides (header: domain,name; - for stdin): normalized, all rows or none",
		Long: `Sets a yes override (confidence 5, by "known import", the note naming the
company) for each company of FILE.csv, whose header names the columns
domain and name. Domains are normalized as the API does; a bad row writes
nothing. "domainclass override set" for a list of companies: see
"domainclass override --help". "domainclass known import" is the same
command under its first name.`,
	}
	cmd.Flags().StringVar(&o.classifierName, "classifier", classifier.DefaultClassifier, "the classifier these companies are a yes for")
	return command(cmd, o)
}

func (o *overrideImport) Validate() error {
	if len(o.args) != 1 {
		return usagef("%s needs exactly one FILE.csv (or - for stdin)", o.name())
	}
	if _, err := classifier.DefaultRegistry().Get(o.classifierName); err != nil {
		return &usageError{err.Error()}
	}
	return nil
}

func (o *overrideImport) Run(ctx context.Context) error {
	r := o.stdin
	if path := o.args[0]; path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("cannot open %s: %w", path, errors.Unwrap(err))
		}
		defer f.Close()
		r = f
	}
	rows, dups, err := readCompaniesCSV(r)
	if err != nil {
		return err
	}
	return o.withDB(ctx, "override-import", func(d *db.DB, _ Deployment) error {
		overrides := make([]classifier.Override, len(rows))
		for i, r := range rows {
			overrides[i] = classifier.Override{Classifier: o.classifierName, Domain: r.domain, Answer: true, Confidence: 5,
				Note: fmt.Sprintf("Listed as a known %s company (%s).", strings.ToUpper(o.classifierName), r.name), SetBy: importSetBy}
		}
		inserted, updated, err := db.OverrideSet(ctx, d.Pool, overrides)
		if err != nil {
			return fmt.Errorf("import failed, nothing was written: %w", err)
		}
		fmt.Fprintf(o.stdout, "%s: %d %s for %s (%d new, %d updated", o.name(), len(rows),
			evals.Plural(len(rows), "company", "companies"), o.classifierName, inserted, updated)
		if dups > 0 {
			fmt.Fprintf(o.stdout, ", %d duplicate rows skipped", dups)
		}
		fmt.Fprintln(o.stdout, ")")
		return nil
	})
}

// company is one row of an import.
type company struct{ domain, name string }

// name is how the command was called, without the program's name:
// "override import" or "known import".
func (i *invocation) name() string {
	_, name, _ := strings.Cut(i.path(), " ")
	return name
}

// readCompaniesCSV reads a CSV with a header naming "domain" and "name" columns
// (in any order, other columns ignored). Every domain is normalized; the
// first bad row stops the import before anything is written.
func readCompaniesCSV(r io.Reader) (rows []company, dups int, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, 0, errors.New("the CSV file is empty; it needs a header line: domain,name")
	} else if err != nil {
		return nil, 0, fmt.Errorf("cannot read the CSV header: %w", err)
	}
	domainCol, nameCol := -1, -1
	for i, h := range header {
		switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))) {
		case "domain":
			domainCol = i
		case "name":
			nameCol = i
		}
	}
	if domainCol < 0 || nameCol < 0 {
		return nil, 0, fmt.Errorf("the CSV header must name the columns domain and name, got %q", strings.Join(header, ","))
	}
	seen := map[string]bool{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("cannot read the CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) <= max(domainCol, nameCol) {
			return nil, 0, fmt.Errorf("line %d: expected a domain and a name", line)
		}
		domain, err := classifier.NormalizeDomain(rec[domainCol])
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", line, err)
		}
		name := classifier.FoldLine(rec[nameCol]) // it becomes the override's note
		if name == "" {
			return nil, 0, fmt.Errorf("line %d: %s has no name", line, domain)
		}
		if seen[domain] {
			dups++
			continue
		}
		seen[domain] = true
		rows = append(rows, company{domain: domain, name: name})
	}
	if len(rows) == 0 {
		return nil, 0, errors.New("the CSV file has a header but no companies")
	}
	return rows, dups, nil
}
