package main

import (
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

// overrideImportCommand is `override import` (and `known import`, its
// first name, for the scripts that call it): it sets a yes override
// (confidence 5) for each company of the file, by importSetBy, with a note
// naming the company.
func (c *cli) overrideImportCommand() *cobra.Command {
	var classifierName string
	cmd := &cobra.Command{
		Use:   "import FILE.csv",
		Short: "load a list of companies as yes overrides (header: domain,name; - for stdin): normalized, all rows or none",
		Long: `Sets a yes override (confidence 5, by "known import", the note naming the
company) for each company of FILE.csv, whose header names the columns
domain and name. Domains are normalized as the API does; a bad row writes
nothing. "domainclass override set" for a list of companies: see
"domainclass override --help". "domainclass known import" is the same
command under its first name.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s needs exactly one FILE.csv (or - for stdin)", commandName(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := classifier.DefaultRegistry().Get(classifierName); err != nil {
				return &usageError{err.Error()}
			}
			r := c.stdin
			if path := args[0]; path != "-" {
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
			cfg, err := c.config()
			if err != nil {
				return err
			}
			d, err := cfg.openDB(ctx, "override-import", 2)
			if err != nil {
				return err
			}
			defer d.Close()
			overrides := make([]classifier.Override, len(rows))
			for i, r := range rows {
				overrides[i] = classifier.Override{Classifier: classifierName, Domain: r.domain, Answer: true, Confidence: 5,
					Note: fmt.Sprintf("Listed as a known %s company (%s).", strings.ToUpper(classifierName), r.name), SetBy: importSetBy}
			}
			inserted, updated, err := db.OverrideSet(ctx, d.Pool, overrides)
			if err != nil {
				return fmt.Errorf("import failed, nothing was written: %w", err)
			}
			fmt.Fprintf(c.stdout, "%s: %d %s for %s (%d new, %d updated", commandName(cmd), len(rows),
				evals.Plural(len(rows), "company", "companies"), classifierName, inserted, updated)
			if dups > 0 {
				fmt.Fprintf(c.stdout, ", %d duplicate rows skipped", dups)
			}
			fmt.Fprintln(c.stdout, ")")
			return nil
		},
	}
	cmd.Flags().StringVar(&classifierName, "classifier", classifier.DefaultClassifier, "the classifier these companies are a yes for")
	return cmd
}

// company is one row of an import.
type company struct{ domain, name string }

// commandName is how the command was called, without the program's name:
// "override import" or "known import".
func commandName(cmd *cobra.Command) string {
	_, name, _ := strings.Cut(cmd.CommandPath(), " ")
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
