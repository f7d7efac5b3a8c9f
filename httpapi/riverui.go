package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"

	"github.com/gin-gonic/gin"
)

// RiverUIPrefix is where River UI is mounted.
const RiverUIPrefix = "/riverui"

// mountRiverUI serves River UI under /riverui/ behind HTTP basic auth. The
// handler strips the prefix itself (it was built with Prefix "/riverui"),
// so it gets the full path. Its health checks stay open for probes.
func (s *Server) mountRiverUI(r *gin.Engine) {
	h := gin.WrapH(s.cfg.RiverUI)
	r.GET(RiverUIPrefix, func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, RiverUIPrefix+"/") })
	r.Any(RiverUIPrefix+"/*path", s.riverUIAuth, sameOrigin, h)
}

// riverUIHealthChecks are River UI's probe routes, the only ones open
// without credentials: matched on the path exactly as sent, so that no
// "..", "%2e%2e" or "//" spelling reaches another route through them.
var riverUIHealthChecks = map[string]bool{
	RiverUIPrefix + "/api/health-checks/complete": true,
	RiverUIPrefix + "/api/health-checks/minimal":  true,
}

func (s *Server) riverUIAuth(c *gin.Context) {
	if (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) &&
		riverUIHealthChecks[c.Request.URL.EscapedPath()] {
		c.Next()
		return
	}
	if s.cfg.RiverUIUser == "" && s.cfg.RiverUIPassword == "" {
		c.Next() // AUTH=off without credentials: local use
		return
	}
	user, pass, ok := c.Request.BasicAuth()
	if !ok || !equal(user, s.cfg.RiverUIUser) || !equal(pass, s.cfg.RiverUIPassword) {
		c.Header("WWW-Authenticate", `Basic realm="River UI", charset="UTF-8"`)
		writeProblem(c, http.StatusUnauthorized, "unauthorized", "River UI needs the operator's user name and password.", nil)
		return
	}
	c.Next()
}

// crossOrigin refuses state-changing requests sent by another site's page
// (Sec-Fetch-Site, else Origin against Host): a browser that keeps the
// operator's Basic credentials would otherwise send them along with a form
// or a fetch of evil.example, and cancel or delete jobs.
var crossOrigin = http.NewCrossOriginProtection()

func sameOrigin(c *gin.Context) {
	if err := crossOrigin.Check(c.Request); err != nil {
		writeProblem(c, http.StatusForbidden, "cross-origin", "River UI and the review page accept changes only from their own pages.", nil)
		return
	}
	c.Next()
}

// securityHeaders keeps the API's and River UI's answers out of frames and
// caches and from being sniffed as another type.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	c.Next()
}

// equal compares in constant time, lengths included (both sides are hashed
// first), so timing tells nothing about the secret.
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
