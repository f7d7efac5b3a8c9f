// Package openapiclient is a test artifact: the Go client that oapi-codegen
// generates from /openapi.yaml, generated as docs/api.md ("Generate a
// client") tells a team that calls the service to. It exists to prove that
// the document generates a working client: the end-to-end tests
// (cmd/domainclass/openapiclient_test.go) use it against the real service,
// and TestGenerated regenerates it and fails when the document and the
// client have drifted apart. It is internal so that no caller imports it.
//
// skip-prune keeps ListRow, the schema of each line of a list's results,
// which no operation names as a JSON body.
//
// Callers in Go use package client (github.com/domainclass/domainclass/client),
// written by hand on the wire types; the binary's CLI is built on it.
package openapiclient

//go:generate go tool oapi-codegen -generate types,client,skip-prune -package openapiclient -o client.gen.go ../../httpapi/openapi.yaml
