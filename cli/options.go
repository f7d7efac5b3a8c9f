package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
)

// options are one command's flags and arguments. cobra parses the command
// line into them; Validate checks them without doing anything (its error
// is a usage error, exit code 2) and Run does the work.
type options interface {
	Validate() error
	Run(ctx context.Context) error
	bind(cmd *cobra.Command, args []string)
}

// invocation is how a command was called: the command (its path for
// messages, the flags given) and its positional arguments. Every options
// type embeds it.
type invocation struct {
	cmd  *cobra.Command
	args []string
}

func (i *invocation) bind(cmd *cobra.Command, args []string) { i.cmd, i.args = cmd, args }

// path is the command as typed: "domainclass lists status".
func (i *invocation) path() string { return i.cmd.CommandPath() }

// given reports whether flag was on the command line.
func (i *invocation) given(flag string) bool { return i.cmd.Flags().Changed(flag) }

// noArgs refuses positional arguments.
func (i *invocation) noArgs() error {
	if len(i.args) > 0 {
		return usagef("%s takes no arguments, got %q", i.path(), strings.Join(i.args, " "))
	}
	return nil
}

// command makes cmd run o: cobra fills o's flags, then Validate, then Run.
func command(cmd *cobra.Command, o options) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd, args)
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	return cmd
}
