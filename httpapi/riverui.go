package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

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
	r.Any(RiverUIPrefix+"/*path", s.riverUIAuth, h)
}

func (s *Server) riverUIAuth(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, RiverUIPrefix+"/api/health-checks/") {
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

// equal compares in constant time, lengths included (both sides are hashed
// first), so timing tells nothing about the secret.
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
