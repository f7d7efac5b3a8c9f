package httpapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// docsFS holds Redoc's standalone bundle (npm package redoc, the version in
// docs/README.md) with its licences, vendored so that GET /docs needs
// nothing but this service: no CDN, no fonts, no network at run time.
//
//go:embed docs/redoc.standalone.js docs/redoc.standalone.js.LICENSE.txt docs/LICENSE
var docsFS embed.FS

// docsPage is GET /docs. Its URLs are relative, so the page also works
// behind a proxy that serves the API under a path prefix; the empty icon
// keeps the browser from asking for a /favicon.ico the service has not.
const docsPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>domainclass API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<redoc spec-url="openapi.yaml" path-in-middle-panel="true" expand-responses="200,202" hide-hostname="true"></redoc>
<script src="docs/redoc.standalone.js"></script>
</body>
</html>
`

// docsCSP lets the page load what it needs from this origin and nothing
// from anywhere else: the script and the document from 'self'. Redoc
// styles its elements with inline style tags (styled-components), draws
// some icons as data: images and runs its search index in a worker made
// from a blob: URL, so those are allowed; inline scripts, eval, other
// origins and being framed are not. TestDocsInABrowser fails on any
// violation, so each source here is one the page uses.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; " +
	"connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsAssets are the files under /docs/, with their content types.
var docsAssets = map[string]string{
	"redoc.standalone.js":             "text/javascript; charset=utf-8",
	"redoc.standalone.js.LICENSE.txt": "text/plain; charset=utf-8",
	"LICENSE":                         "text/plain; charset=utf-8",
}

// docsETags are the assets' strong validators, computed once: the bundle is
// a megabyte, so a browser revalidates it instead of fetching it again.
var docsETags = func() map[string]string {
	out := map[string]string{}
	for name := range docsAssets {
		b, err := docsFS.ReadFile("docs/" + name)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		sum := sha256.Sum256(b)
		out[name] = `"` + hex.EncodeToString(sum[:16]) + `"`
	}
	return out
}()

// docs handles GET /docs: the API reference, rendered in the browser from
// /openapi.yaml by the vendored Redoc.
func docs(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", docsCSP)
	h.Set("Referrer-Policy", "no-referrer")
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(docsPage))
}

// docsAsset handles GET /docs/:file, the files the page loads.
func docsAsset(c *gin.Context) {
	name := c.Param("file")
	contentType, ok := docsAssets[name]
	b, err := docsFS.ReadFile("docs/" + name)
	if !ok || err != nil {
		writeProblem(c, http.StatusNotFound, "not-found", "No such route.", nil)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", docsETags[name])
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(b))
}
