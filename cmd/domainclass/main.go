// Command domainclass is the one binary of the service: the API, the
// workers, migrations and the operator and caller commands.
package main

import "os"

func main() {
	ctx, stop := signalContext()
	defer stop()
	os.Exit(Run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
