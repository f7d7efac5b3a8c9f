package listfile

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCSVReader holds csvReader to encoding/csv's reading of every input
// within the bounds: the same records, the same errors, in the same
// places.
func FuzzCSVReader(f *testing.F) {
	for _, seed := range []string{
		"domain,ref\nacme.com,r1\n",
		"\ufeffCompany,Domain,Ref\r\n\"Acme, Inc.\",acme.com,\"r \"\"1\"\"\"\r\n\"Multi\r\nline\",beta.com,r2\r\n\r\nGamma,gamma.com,\"r\n3\"",
		"a,\"b\nc\",d\n\n\ne\r\n",
		"a\"b,c\nd,e\n",
		"\"a\"x,b\nc\n",
		"\"abc\nd,e\n",
		"\"a\"\r,b\n",
		"a,b\r",
		"\r\n\r\n",
		"a,,\n,\n",
		"\"\"\n\"\"\"\"\n",
		"x\n\"unclosed",
		"a,\"b\"\"\",\"\"\r\nc\r",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > maxRecordBytes || strings.Count(in, ",") >= maxCSVFields {
			t.Skip("beyond the bounds, which encoding/csv does not have")
		}
		std := csv.NewReader(strings.NewReader(in))
		std.FieldsPerRecord = -1
		ours := newCSVReader(strings.NewReader(in))
		for i := 0; ; i++ {
			want, wantErr := std.Read()
			got, err := ours.Read()
			var perr *csv.ParseError
			switch {
			case wantErr == io.EOF:
				require.Equal(t, io.EOF, err, "record %d: the end", i)
				return
			case errors.As(wantErr, &perr) && errors.Is(err, errUnclosedQuote):
				// A quoted field the body ends in: encoding/csv's ErrQuote,
				// with nothing after it.
				require.Equal(t, csv.ErrQuote, perr.Err, "record %d", i)
				_, next := std.Read()
				require.Equal(t, io.EOF, next, "record %d: an unclosed quote is the last record", i)
				return
			case errors.As(wantErr, &perr):
				var serr *csvSyntaxError
				require.True(t, errors.As(err, &serr), "record %d: want %v, got %v (%q)", i, wantErr, err, got)
				require.Equal(t, perr.Err, serr.Err, "record %d", i)
			default:
				require.NoError(t, wantErr)
				require.NoError(t, err, "record %d", i)
				require.Equal(t, want, got, "record %d", i)
			}
		}
	})
}

// A reader keeps only the fields it is asked for, and refuses a record
// over a bound.
func TestCSVReader(t *testing.T) {
	t.Parallel()
	r := newCSVReader(strings.NewReader("a,\"b,\"\"b\",c\nd,e\n"))
	r.keep = func(col int) bool { return col == 1 }
	rec, err := r.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"", `b,"b`, ""}, rec)
	rec, err = r.Read()
	require.NoError(t, err)
	require.Equal(t, []string{"", "e"}, rec)

	for _, tt := range []struct {
		in   string
		want error
	}{
		{"\"" + strings.Repeat("a\n", maxRecordBytes/2), errRecordTooLarge},
		{strings.Repeat("a", maxRecordBytes) + "\n", errRecordTooLarge},
		{strings.Repeat("a", maxRecordBytes-1) + "\n", nil},
		{strings.Repeat(",", maxCSVFields) + "\n", errTooManyFields},
		{strings.Repeat(",", maxCSVFields-1) + "\n", nil},
	} {
		_, err := newCSVReader(strings.NewReader(tt.in)).Read()
		require.ErrorIs(t, err, tt.want, "%.20q… (%d bytes)", tt.in, len(tt.in))
	}
}
