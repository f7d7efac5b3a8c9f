// Command domainclass is the one binary of the service: the API, the
// workers, migrations and the operator and caller commands. The commands
// are package cli; this package is the wiring: the configuration
// (config.go), the pools of a role (pools.go; their sizes are db/pools'),
// the providers, the processes (app.go, and their workers in workers.go),
// and the cli.Deployment built from them (wiring.go). Logs and traces are
// internal/logging's and internal/tracing's.
package main

import "os"

func main() {
	ctx, stop := signalContext()
	defer stop()
	os.Exit(Run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
