package httpapi

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/listfile"
	"github.com/domainclass/domainclass/wire"
)

// listFormat is how a list body is written, by its Content-Type (the
// results' format too).
type listFormat = listfile.Format

const (
	formatCSV    = listfile.CSV
	formatNDJSON = listfile.NDJSON
	formatText   = listfile.Text
)

// listFormatOf reads the Content-Type of an upload, or returns a 415
// problem.
func listFormatOf(contentType string) (listFormat, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil {
		switch f := listFormat(strings.ToLower(mt)); f {
		case formatCSV, formatNDJSON, formatText:
			return f, nil
		}
	}
	return "", &problem{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
		detail: fmt.Sprintf("Send the list as text/csv (with a domain column), application/x-ndjson or text/plain, not %q.", contentType)}
}

// listBody is an upload's body: read at no less than the minimum rate
// (rateReader), and bounded, decompressed and hashed by listfile.Body.
type listBody struct {
	*listfile.Body // nil: refused before it was opened
	req            *http.Request
}

// openListBody opens an upload's body, read within the rate and limits of
// l; rc sets the connection's read deadline (nil: none). The body it
// returns, even with an error, must be finished once the answer is
// written.
func openListBody(r *http.Request, rc *http.ResponseController, l ListLimits, hashed bool) (*listBody, error) {
	b := &listBody{req: r}
	gzip := false
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gzip = true
	default:
		return b, &problem{status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type",
			detail: fmt.Sprintf("Content-Encoding %q is not supported; send gzip, or no encoding.", enc)}
	}
	var err error
	b.Body, err = listfile.OpenBody(newRateReader(r.Body, rc, l.UploadMinRate, l.UploadRateWindow),
		listfile.BodyOptions{MaxBytes: l.MaxBytes, Gzip: gzip, Hashed: hashed})
	return b, err
}

// finish runs once the handler has answered. When it refused the list
// while the caller was still sending (over the limit, unreadable, a key
// reused), the answer is flushed and the rest of the body read and dropped
// for up to refusedDrain. net/http closes a connection whose body is
// unread at once when the request carried Expect: 100-continue (as the CLI's
// and curl's uploads do), and the kernel then answers the bytes still
// arriving with a reset: a client still writing gets "connection reset by
// peer" instead of the answer, and retries the whole upload.
func (b *listBody) finish(c *gin.Context) {
	if c.Writer.Status() < http.StatusBadRequest || b.Body == nil || b.Sent() == 0 {
		return // accepted (the body was read to its end), or refused before a byte was asked for
	}
	c.Writer.Flush()
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(refusedDrain))
	_, _ = io.Copy(io.Discard, b.req.Body)
}

// refusedDrain bounds the reading of a refused upload's rest: long enough
// for the client to read the answer, short enough that a refused gigabyte
// costs a handler a second.
const refusedDrain = time.Second

// csvColumns name a CSV upload's domain and ref columns.
type csvColumns = listfile.Columns

// maxColumnName bounds a column name in the query.
const maxColumnName = 256

// csvColumnsParam reads ?domain_column= and ?ref_column= (a 400 problem for
// an empty or long name, or for an upload that is not a CSV).
func csvColumnsParam(q url.Values, format listFormat) (csvColumns, error) {
	var c csvColumns
	for _, p := range []struct {
		name string
		into *string
	}{{"domain_column", &c.Domain}, {"ref_column", &c.Ref}} {
		vs, ok := q[p.name]
		if !ok {
			continue
		}
		v := strings.TrimSpace(firstOf(vs))
		switch {
		case v == "" || len(v) > maxColumnName:
			return c, &problem{status: http.StatusBadRequest, slug: "invalid-query",
				detail: fmt.Sprintf("%s must name a column of the CSV's header row (1 to %d characters).", p.name, maxColumnName)}
		case format != formatCSV:
			return c, &problem{status: http.StatusBadRequest, slug: "invalid-query",
				detail: fmt.Sprintf("%s names a column of a text/csv upload; this one is %s.", p.name, format)}
		}
		*p.into = v
	}
	return c, nil
}

// listReader is an upload's rows, read by listfile, and what they counted
// once spooled (spoolRows).
type listReader struct {
	*listfile.Reader
	rows, domains, duplicates, rejected int
	sample                              []wire.RejectedRow
}

func newListReader(format listFormat, body io.Reader, maxRows int, columns csvColumns) *listReader {
	return &listReader{Reader: listfile.NewReader(format, body, listfile.Options{MaxRows: maxRows, Columns: columns})}
}

// counted keeps what the reader counted.
func (r *listReader) counted() {
	c := r.Counts()
	r.rows, r.domains, r.duplicates, r.rejected, r.sample = c.Rows, c.Domains, c.Duplicates, c.Rejected, c.Sample
}

// spool is an upload's listfile.Spool.
type spool struct{ *listfile.Spool }

// newSpool creates an empty spool in dir, of at most max bytes.
func newSpool(dir string, max int64) (*spool, error) {
	f, err := listfile.NewSpool(dir, max)
	if err != nil {
		return nil, err
	}
	return &spool{f}, nil
}

func (s *spool) read() (*listfile.SpoolReader, error) { return s.Read() }

// spoolDomains is the db.DomainSource of a spool's distinct domains: the
// rows with a domain that no earlier row had (a dry run copies only
// those).
type spoolDomains struct{ *listfile.SpoolReader }

func (d spoolDomains) Next() bool {
	for d.SpoolReader.Next() {
		if r := d.Row(); r.Domain != "" && r.FirstRow == 0 {
			return true
		}
	}
	return false
}

func (d spoolDomains) Domain() string { return d.Row().Domain }
