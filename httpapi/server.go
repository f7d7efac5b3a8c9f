// Package httpapi is the HTTP API: the gin router, the handlers, auth,
// and problem+json errors.
package httpapi

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/domainclass/domainclass/classifier"
	"github.com/domainclass/domainclass/db"
	"github.com/domainclass/domainclass/jobs"
)

// RiverClient is what the API needs of River's client (an insert-only one
// is enough), to hand to the jobs steps its handlers call: inserts in the
// request's transaction (jobs.AcceptJob, AcceptList, RetryList) and, to
// cancel a list, listing, cancelling and retrying its jobs
// (jobs.CancelList).
type RiverClient interface {
	jobs.ManyInserter
	jobs.JobCanceller
}

// Config configures a Server.
type Config struct {
	// DB is Postgres: handlers begin their transactions on its pool.
	DB *db.DB
	// River inserts the River jobs of accepted requests, in the
	// request's transaction.
	River    RiverClient
	Registry *classifier.Registry
	Auth     Authenticator
	Logger   *slog.Logger
	// DBTimeout bounds the database work of one short request, and the
	// wait for a connection of every request (the API-key lookup's too), so
	// that a request fails with 503 instead of hanging while Postgres is
	// unreachable or every connection is busy. Uploads, downloads and
	// cancels of lists then run for as long as listTimeout allows.
	// Zero is DefaultDBTimeout.
	DBTimeout time.Duration
	// Metrics records HTTP metrics when set; MetricsHandler serves /metrics.
	Metrics        *Metrics
	MetricsHandler http.Handler
	// RiverUI, when set, is served under /riverui/ behind basic auth with
	// RiverUIUser and RiverUIPassword (both empty: open, for AUTH=off).
	RiverUI         http.Handler
	RiverUIUser     string
	RiverUIPassword string
	// Operators mounts the review page and its actions under /review,
	// behind RiverUIUser and RiverUIPassword as River UI (both empty: open,
	// for AUTH=off).
	Operators bool
	// Webhooks is set when WEBHOOK_SECRET is configured: only then is an
	// X-Callback-URL accepted (deliveries could not be signed otherwise).
	Webhooks bool
	// Callers are the deployment's per-caller limits, every caller's unless
	// its key sets its own; zero fields: DefaultCallerLimits's.
	Callers CallerLimits
	// Lists are the list routes' limits; zero fields: DefaultListLimits's.
	Lists ListLimits
	// Queue holds the lists' chunking (ListChunkRows, ListChunksInFlight,
	// BatchMaxRequests), their retention and the webhooks' attempts, which
	// an upload, a retry and a cancel use; zero: jobs.DefaultSettings().
	Queue jobs.Settings
	// Estimate is what a dry run's estimate and a caller's budget check
	// are computed from; zero fields: DefaultEstimator's.
	Estimate Estimator
	// ListCounts count rows and lists that end here, for metrics.
	ListCounts ListCounters
	// TracerProvider, when set, makes a server span per request. The trace
	// context a caller sends is read with Propagator (nil: the global one)
	// and, unless TrustIncomingTrace, only linked: the span starts a trace
	// of ours (TRACE_TRUST_INCOMING).
	TracerProvider     trace.TracerProvider
	Propagator         propagation.TextMapPropagator
	TrustIncomingTrace bool
	// CallbackAllowPrivate accepts callback URLs on private, loopback and
	// link-local addresses, and plain http (ALLOW_PRIVATE_ADDRESSES: tests
	// and local use).
	CallbackAllowPrivate bool
	// ReadyDetail, when set, says what /readyz adds to "ok" ("" nothing):
	// a deployment's workers that know no limit of the model account say
	// so (issue 38).
	ReadyDetail func() string
	// Clock is the time the per-caller request rate is counted in (nil:
	// time.Now). Tests move their own clock.
	Clock func() time.Time
}

// Server holds the API's dependencies.
type Server struct {
	cfg        Config
	router     *gin.Engine
	limiter    *callerLimiter
	uploads    *gate
	downloads  *gate
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// DefaultDBTimeout is Config.DBTimeout's default. A short request's
// database work takes milliseconds; after 1.5 s the database is down or
// every connection is busy, and a 503 with Retry-After tells the client to
// come back in 2 s rather than keeping it, and its connection, waiting.
const DefaultDBTimeout = 1500 * time.Millisecond

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 64 << 10

// New returns a server with its routes.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, limiter: newCallerLimiter(cfg.Clock),
		uploads:   newUploadGate(cfg.Lists.MaxUploads, cfg.Callers.MaxUploads),
		downloads: newDownloadGate(cfg.Lists.MaxDownloads, cfg.Callers.MaxDownloads)}

	gin.SetMode(gin.ReleaseMode) // no debug banner; we log requests ourselves
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer("github.com/domainclass/domainclass/httpapi")
		s.propagator = cfg.Propagator
		if s.propagator == nil {
			s.propagator = otel.GetTextMapPropagator()
		}
		r.Use(s.traceRequests)
	}
	r.Use(s.recover, s.logRequests, securityHeaders)
	if cfg.Metrics != nil {
		r.Use(cfg.Metrics.middleware)
	}
	r.NoRoute(func(c *gin.Context) { writeProblem(c, http.StatusNotFound, "not-found", "No such route.", nil) })
	r.NoMethod(func(c *gin.Context) {
		c.Header("Allow", allowedMethods(r.Routes(), c.Request.URL.Path))
		writeProblem(c, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed on this route.", nil)
	})

	s.routes(r)
	if cfg.MetricsHandler != nil {
		r.GET("/metrics", gin.WrapH(cfg.MetricsHandler))
	}
	if cfg.RiverUI != nil {
		s.mountRiverUI(r)
	}
	if cfg.Operators {
		s.mountReview(r)
	}
	s.router = r
	return s
}

// routes are the API's routes; those under /domains, /lists and /callers
// need a caller.
func (s *Server) routes(r *gin.Engine) {
	s.health(r)
	r.GET("/problems/:slug", problemDoc)
	r.GET("/openapi.yaml", openapiDoc)
	r.GET("/docs", docs)
	r.GET("/docs/:file", docsAsset)

	domains := r.Group("/domains", s.requireCaller)
	domains.POST("/classify", s.classifyCreate)
	domains.GET("/classify/:job_id", s.classifyGet)
	domains.GET("/changes", s.changesIndex)
	domains.POST("/:domain/disputes", s.disputeCreate)

	lists := r.Group("/lists", s.requireCaller)
	lists.POST("", s.listCreate)
	lists.GET("", s.listIndex)
	lists.POST("/:list_id/retry", s.listRetry)
	lists.GET("/:list_id", s.listGet)
	lists.GET("/:list_id/results", s.listResults)
	lists.DELETE("/:list_id", s.listCancel)

	callers := r.Group("/callers", s.requireCaller)
	callers.GET("/me", s.callerMe)
}

// pool is the API's pool as a request uses it: a connection within
// DBTimeout, or 503.
func (s *Server) pool() db.Bounded { return db.Bounded{Pool: s.cfg.DB.Pool, Wait: s.cfg.DBTimeout} }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Logger.ErrorContext(c.Request.Context(), "panic in handler", "route", c.FullPath(), "panic", v)
			writeProblem(c, http.StatusInternalServerError, "internal", "Internal error.", nil)
		}
	}()
	c.Next()
}

func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "/healthz" || route == "/readyz" || route == "/metrics" || strings.HasPrefix(route, RiverUIPrefix) {
		return
	}
	s.cfg.Logger.LogAttrs(c.Request.Context(), slog.LevelInfo, "http request",
		slog.String("method", c.Request.Method), slog.String("route", route),
		slog.Int("status", c.Writer.Status()), slog.Duration("duration", time.Since(start)))
}
