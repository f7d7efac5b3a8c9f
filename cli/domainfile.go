package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/client"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/listfile"
)

type readCloser struct {
	io.Reader
	io.Closer
}

// domainFile is submit's --file, the one reader of domain files for jobs
// and lists: one domain per line, or a CSV (its first line has a comma),
// read by the server's rules (listfile) whether submit reads it or sends
// it as a list.
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
	format, err := src.format()
	if err != nil {
		return nil, "", err
	}
	contentType := client.ListText
	if format == listfile.CSV {
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

// format is the input's: a CSV when its first line has a comma, else a
// domain a line (listfile.Detect).
func (s *domainFile) format() (listfile.Format, error) {
	r, err := s.open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	return listfile.Detect(bufio.NewReader(r))
}

// rows reads the input's rows as the server reads an upload of it
// (listfile, with no limit of rows), and calls each with every row in
// order until it returns false: a row is a domain, the duplicate of an
// earlier row's, or rejected with its reason. It returns the error that
// refuses the whole file, in the server's words (its flags named as
// submit's).
func (s *domainFile) rows(each func(db.ListRowIn) bool) error {
	format, err := s.format()
	if err != nil {
		return err
	}
	r, err := s.open()
	if err != nil {
		return err
	}
	defer r.Close()
	rows := listfile.NewReader(format, r, listfile.Options{})
	defer rows.Close()
	for rows.Next() {
		if !each(rows.Row()) {
			return nil
		}
	}
	var lerr *listfile.Error
	if err := rows.Err(); errors.As(err, &lerr) {
		said := *lerr
		said.Detail = flagWords.Replace(lerr.Detail)
		return &said
	} else if err != nil {
		return err
	}
	return nil
}

// Close removes a temporary file.
func (s *domainFile) Close() {
	if s.temp {
		_ = os.Remove(s.path)
	}
}

// countDistinct counts the distinct domains among inputs and src's, up to
// limit (it stops reading there). Inputs that are not domains do not
// count: a list would keep them as rejected rows.
func countDistinct(inputs []string, src *domainFile, limit int) (int, error) {
	seen := map[string]bool{}
	for _, in := range inputs {
		if d, err := classifier.NormalizeDomain(in); err == nil {
			seen[d] = true
		}
	}
	if src == nil || len(seen) >= limit {
		return min(len(seen), limit), nil
	}
	err := src.rows(func(r db.ListRowIn) bool {
		if r.Domain != "" {
			seen[r.Domain] = true
		}
		return len(seen) < limit
	})
	return len(seen), err
}
