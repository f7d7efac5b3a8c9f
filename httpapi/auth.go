package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/classifier"
)

// Authenticator says who is calling. It returns an EUNAUTHORIZED error for
// a missing, malformed, unknown or revoked credential.
type Authenticator interface {
	Authenticate(r *http.Request) (caller string, err error)
}

// LocalCaller is the caller of every request when auth is off.
const LocalCaller = "local"

// AuthOff lets every request in as LocalCaller (AUTH=off, local use only).
type AuthOff struct{}

// Authenticate always succeeds.
func (AuthOff) Authenticate(*http.Request) (string, error) { return LocalCaller, nil }

// AuthNone refuses every request: auth is on and no credential can be
// checked.
type AuthNone struct{}

// Authenticate always fails.
func (AuthNone) Authenticate(*http.Request) (string, error) {
	return "", classifier.Errorf(classifier.EUNAUTHORIZED, "Authentication is required.")
}

const callerKey = "domainclass.caller"

// requireCaller resolves the caller, or answers 401.
func (s *Server) requireCaller(c *gin.Context) {
	caller, err := s.cfg.Auth.Authenticate(c.Request)
	if err != nil {
		writeError(c, s.cfg.Logger, err)
		return
	}
	c.Set(callerKey, caller)
	c.Next()
}

func callerOf(c *gin.Context) string { return c.GetString(callerKey) }
