package cli

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
)

type readCloser struct {
	io.Reader
	io.Closer
}

// domainFile is submit's --file, the one reader of domain files for jobs
// and lists: one domain per line, or a CSV (its first line has a comma).
// A list upload reads it once per attempt, so stdin is kept: in memory up
// to stdinInMemory, in a temporary file beyond.
type domainFile struct {
	name string // for messages: the path, or "stdin"
	path string // the file to read; "" when data holds the input
	data []byte
	temp bool // path is a temporary file, removed by Close
}

// stdinInMemory is how much of stdin is kept in memory; a longer input is
// spooled to a temporary file.
const stdinInMemory = 4 << 20

// openDomainFile opens the file called name, or stdin for "-".
func (c *base) openDomainFile(name string) (*domainFile, error) {
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", name, errors.Unwrap(err))
		}
		_ = f.Close()
		return &domainFile{name: name, path: name}, nil
	}
	data, err := io.ReadAll(io.LimitReader(c.stdin, stdinInMemory+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read stdin: %w", err)
	}
	if len(data) <= stdinInMemory {
		return &domainFile{name: "stdin", data: data}, nil
	}
	f, err := os.CreateTemp("", "domainclass-stdin-*")
	if err != nil {
		return nil, fmt.Errorf("cannot keep stdin in a temporary file: %w", err)
	}
	s := &domainFile{name: "stdin", path: f.Name(), temp: true}
	_, err = io.Copy(f, io.MultiReader(bytes.NewReader(data), c.stdin))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cannot keep stdin in a temporary file: %w", err)
	}
	return s, nil
}

// listBody is the body of a list upload, reopened from its start for each
// attempt: the domains given as arguments, one a line, then the file as it
// is; and its content type. A CSV file takes no arguments beside it, and
// columns name a CSV's only.
func listBody(args []string, src *domainFile, columns bool) (func() (io.ReadCloser, error), string, error) {
	prefix := ""
	if len(args) > 0 {
		prefix = strings.Join(args, "\n") + "\n"
	}
	if src == nil {
		return func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(prefix)), nil }, client.ListText, nil
	}
	isCSV, err := src.isCSV()
	if err != nil {
		return nil, "", err
	}
	contentType := client.ListText
	if isCSV {
		if len(args) > 0 {
			return nil, "", usagef("%s is a CSV file: add the domains given as arguments to it, or send them apart", src.name)
		}
		contentType = client.ListCSV
	} else if columns {
		return nil, "", usagef("%s is not a CSV file (its first line has no comma): --domain-column and --ref-column name a CSV's columns", src.name)
	}
	return func() (io.ReadCloser, error) {
		r, err := src.open()
		if err != nil {
			return nil, err
		}
		return readCloser{io.MultiReader(strings.NewReader(prefix), r), r}, nil
	}, contentType, nil
}

// open returns the input from its start.
func (s *domainFile) open() (io.ReadCloser, error) {
	if s.path == "" {
		return io.NopCloser(bytes.NewReader(s.data)), nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", s.name, errors.Unwrap(err))
	}
	return f, nil
}

// isCSV reports whether the input is a CSV (its first line has a comma).
func (s *domainFile) isCSV() (bool, error) {
	r, err := s.open()
	if err != nil {
		return false, err
	}
	defer r.Close()
	return firstLineHasComma(bufio.NewReader(r))
}

// domains reads every input (see scanDomainList).
func (s *domainFile) domains() ([]string, error) {
	r, err := s.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readDomainList(r)
}

// Close removes a temporary file.
func (s *domainFile) Close() {
	if s.temp {
		_ = os.Remove(s.path)
	}
}

// scanDomainList reads one domain per line (blank lines and # comments
// skipped), or a CSV whose header names a "domain" column, and calls each
// with every input in order until it returns false. lenient skips CSV
// records that cannot be read instead of failing.
func scanDomainList(r io.Reader, lenient bool, each func(string) bool) error {
	br := bufio.NewReader(r)
	csvFile, err := firstLineHasComma(br)
	if err != nil {
		return err
	}
	if csvFile {
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1
		header, err := cr.Read()
		if err != nil {
			return fmt.Errorf("cannot read the CSV header: %w", err)
		}
		col := -1
		for i, h := range header {
			if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")), "domain") {
				col = i
			}
		}
		if col < 0 {
			return fmt.Errorf("the CSV header has no \"domain\" column: %q", strings.Join(header, ","))
		}
		for {
			rec, err := cr.Read()
			var perr *csv.ParseError
			switch {
			case err == io.EOF:
				return nil
			case lenient && errors.As(err, &perr):
				continue
			case err != nil:
				return fmt.Errorf("cannot read the CSV: %w", err)
			}
			if col < len(rec) && strings.TrimSpace(rec[col]) != "" {
				if !each(strings.TrimSpace(rec[col])) {
					return nil
				}
			}
		}
	}
	sc := bufio.NewScanner(br)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			if !each(line) {
				return nil
			}
		}
	}
	return sc.Err()
}

// readDomainList reads every input of a domain list (see scanDomainList).
func readDomainList(r io.Reader) ([]string, error) {
	var out []string
	err := scanDomainList(r, false, func(s string) bool { out = append(out, s); return true })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstLineHasComma tells a CSV file from a list of domains: the first line
// of a CSV (its header) has a comma.
func firstLineHasComma(br *bufio.Reader) (bool, error) {
	first, err := br.Peek(4096)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return false, fmt.Errorf("cannot read the domain list: %w", err)
	}
	firstLine, _, _ := strings.Cut(string(first), "\n")
	return strings.Contains(firstLine, ","), nil
}

// countDistinct counts the distinct domains among inputs and src's, up to
// limit (it stops reading there). Inputs that are not domains, and CSV
// lines that cannot be read, do not count: a list would keep them as
// rejected rows.
func countDistinct(inputs []string, src *domainFile, limit int) (int, error) {
	seen := map[string]bool{}
	each := func(in string) bool {
		if d, err := classifier.NormalizeDomain(in); err == nil {
			seen[d] = true
		}
		return len(seen) < limit
	}
	for _, in := range inputs {
		if !each(in) {
			return len(seen), nil
		}
	}
	if src != nil {
		r, err := src.open()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		if err := scanDomainList(r, true, each); err != nil {
			return 0, err
		}
	}
	return len(seen), nil
}
