package cli

import (
	"io"
	"os"
	"strings"
	"unicode"

	"golang.org/x/term"
)

// terminalWriter passes text on to a terminal with its control characters
// shown as U+FFFD: the C0 controls but newline and tab, DEL, and the C1
// controls (U+0080–U+009F; U+009B is CSI). What the commands print comes
// in part from callers, web pages and models, and an escape sequence in it
// must not drive the terminal (recolour it, retitle it, rewrite what was
// printed before). Run puts it on stdout when stdout is a terminal, as ls
// shows odd file names; a file or a pipe gets the bytes as they are.
type terminalWriter struct {
	w io.Writer
	// afterC2 is set when the last byte written was 0xC2, the first byte of
	// a C1 control in UTF-8, whose second byte comes in the next write.
	afterC2 bool
	buf     []byte
}

const replacement = "\uFFFD"

// Write writes p with its control characters replaced. It returns len(p)
// when the text was written whole.
func (t *terminalWriter) Write(p []byte) (int, error) {
	out := t.buf[:0]
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0xC2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9F:
			out = append(out, replacement...) // a C1 control, whole in p
			i++
		case i == 0 && t.afterC2 && c >= 0x80 && c <= 0x9F:
			// The second byte of a C1 control whose 0xC2 went out with the
			// last write: replaced, the 0xC2 alone reads as a broken byte.
			out = append(out, replacement...)
		case (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F:
			out = append(out, replacement...)
		default:
			out = append(out, c)
		}
	}
	if len(p) > 0 {
		t.afterC2 = p[len(p)-1] == 0xC2
	}
	t.buf = out[:0]
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printable replaces control characters, escape sequences' ESC among them,
// so that text from a model or a website cannot drive the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}
