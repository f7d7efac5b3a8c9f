package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTerminalWriter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"TextAsItIs", []string{"row,input\n1,\tcafé ¢ 日本\n"}, "row,input\n1,\tcafé ¢ 日本\n"},
		{"EscapeSequences", []string{"a\x1b[31mred\x1b]0;title\x07"}, "a\uFFFD[31mred\uFFFD]0;title\uFFFD"},
		{"CarriageReturnBackspaceDelete", []string{"ok\rforged\b\x7f"}, "ok\uFFFDforged\uFFFD\uFFFD"},
		{"C1Control", []string{"a\u009b31mb"}, "a\uFFFD31mb"},
		{"C1ControlSplitAcrossWrites", []string{"a\xc2", "\x9b31m"}, "a\xc2\uFFFD31m"},
		{"NotAControlSplitAcrossWrites", []string{"\xc2", "\xa2"}, "¢"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			w := &terminalWriter{w: &out}
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			require.Equal(t, tt.want, out.String())
		})
	}
}
