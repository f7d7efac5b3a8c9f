// Package openapiclient is the Go client that oapi-codegen generates from
// /openapi.yaml, generated as docs/api.md ("Generate a client") tells a
// team that calls the service to. It is committed so that the end-to-end
// tests can use it against the real service; TestGenerated regenerates it
// and fails when the document and the client have drifted apart.
//
// skip-prune keeps ListRow, the schema of each line of a list's results,
// which no operation names as a JSON body.
//
// The binary's own client is httpapi/client, written by hand on the wire
// types; this one is the proof that a generated client works.
package openapiclient

//go:generate go tool oapi-codegen -generate types,client,skip-prune -package openapiclient -o client.gen.go ../openapi.yaml
