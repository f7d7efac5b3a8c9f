package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/internal/apikey"
)

// Caller is who sent a request, with their limits.
type Caller struct {
	Name string
	// CallerLimits are its limits: an Authenticator gives its key's own (0:
	// not set), and requireCaller puts Config.Callers under them.
	CallerLimits
}

// Authenticator says who is calling. It returns a 401 problem for a
// missing, malformed, unknown or revoked credential, and db.ErrUnavailable
// when it cannot tell (the database is down, or did not answer before the
// request's context ended: the server bounds it).
type Authenticator interface {
	Authenticate(r *http.Request) (Caller, error)
}

// LocalCaller is the caller of every request when auth is off.
const LocalCaller = "local"

// AuthOff lets every request in as LocalCaller (AUTH=off, local use only),
// with the deployment's limits.
type AuthOff struct{}

// Authenticate always succeeds.
func (AuthOff) Authenticate(*http.Request) (Caller, error) {
	return Caller{Name: LocalCaller}, nil
}

// AuthNone refuses every request.
type AuthNone struct{}

// Authenticate always fails.
func (AuthNone) Authenticate(*http.Request) (Caller, error) {
	return Caller{}, errUnauthorized("Authentication is required.")
}

// APIKeyAuth checks "Authorization: Bearer dc_…" against the stored hashes.
// Lookups, of unknown keys too, are cached for a short TTL (a revoked key
// stops working within it); last_used_at is written at most once a minute per key.
type APIKeyAuth struct {
	db     db.DBTX
	ttl    time.Duration
	logger *slog.Logger

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cachedKey
	misses  map[[sha256.Size]byte]time.Time // unknown keys, until when they are refused without a query
	touched map[string]time.Time
}

type cachedKey struct {
	key     *db.APIKey
	expires time.Time
}

// maxCachedKeys bounds each cache: the valid keys', and the unknown keys'
// (kept apart, so that a flood of made-up keys never evicts real ones).
const maxCachedKeys = 10_000

// NewAPIKeyAuth returns API-key auth over exec (the pool): a key's lookup
// is reused for ttl (DefaultAuthCacheTTL). A caller gets its key's own
// limits; the server puts the deployment's under them.
func NewAPIKeyAuth(exec db.DBTX, ttl time.Duration, logger *slog.Logger) *APIKeyAuth {
	return &APIKeyAuth{db: exec, ttl: ttl, logger: logger,
		cache: map[[sha256.Size]byte]cachedKey{}, misses: map[[sha256.Size]byte]time.Time{}, touched: map[string]time.Time{}}
}

// Authenticate implements Authenticator.
func (a *APIKeyAuth) Authenticate(r *http.Request) (Caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Caller{}, errUnauthorized("Send your API key as \"Authorization: Bearer <key>\".")
	}
	scheme, key, ok := strings.Cut(h, " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !apikey.WellFormed(key) {
		return Caller{}, errUnauthorized("The Authorization header is malformed: it must be \"Bearer dc_…\".")
	}
	sum := apikey.Hash(key)

	now := time.Now()
	a.mu.Lock()
	entry, hit := a.cache[sum]
	missUntil, missed := a.misses[sum]
	a.mu.Unlock()
	if missed && now.Before(missUntil) {
		return Caller{}, errUnauthorized("The API key is not valid (unknown or revoked).")
	}
	if !hit || now.After(entry.expires) {
		k, err := db.APIKeyGetByHash(r.Context(), a.db, sum[:])
		switch {
		case errors.Is(err, db.ErrNotFound):
			// The same unknown key sent again is refused without a query
			// for ttl: a key is random, so none is created meanwhile.
			a.mu.Lock()
			if len(a.misses) >= maxCachedKeys {
				clear(a.misses)
			}
			a.misses[sum] = now.Add(a.ttl)
			a.mu.Unlock()
			return Caller{}, errUnauthorized("The API key is not valid (unknown or revoked).")
		case err != nil:
			return Caller{}, err
		}
		entry = cachedKey{key: k, expires: now.Add(a.ttl)}
		a.mu.Lock()
		if len(a.cache) >= maxCachedKeys {
			clear(a.cache)
		}
		a.cache[sum] = entry
		a.mu.Unlock()
	}
	k := entry.key
	if k.RevokedAt != nil {
		return Caller{}, errUnauthorized("The API key is not valid (unknown or revoked).")
	}
	a.touch(k.Name, now)
	return Caller{Name: k.Name,
		CallerLimits: CallerLimits{RatePerMinute: k.RatePerMinute, MaxQueuedDomains: k.MaxQueuedDomains, MaxStoredRows: k.MaxStoredRows}}, nil
}

// touch records last use at most once a minute per key, off the request.
func (a *APIKeyAuth) touch(name string, now time.Time) {
	a.mu.Lock()
	last := a.touched[name]
	due := now.Sub(last) >= time.Minute
	if due {
		a.touched[name] = now
	}
	a.mu.Unlock()
	if !due {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := db.APIKeyTouch(ctx, a.db, name); err != nil {
			a.logger.Warn("error recording API key use", "api_key", name, "error", err)
		}
	}()
}

func errUnauthorized(msg string) error {
	return &problem{status: http.StatusUnauthorized, slug: "unauthorized", detail: msg}
}

func cmpOr(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

const callerKey = "domainclass.caller"

// requireCaller resolves the caller, with its limits: its key's own over
// the deployment's (Config.Callers). It answers 401 (503 when the key
// cannot be looked up within DBTimeout).
func (s *Server) requireCaller(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	caller, err := s.cfg.Auth.Authenticate(c.Request.WithContext(ctx))
	if err != nil {
		s.writeError(c, err)
		return
	}
	caller.CallerLimits = caller.CallerLimits.over(s.cfg.Callers)
	c.Set(callerKey, caller)
	c.Next()
}

func callerOf(c *gin.Context) Caller {
	caller, _ := c.Get(callerKey)
	cl, _ := caller.(Caller)
	return cl
}
