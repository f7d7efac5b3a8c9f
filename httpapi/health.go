package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/domainclass/domainclass/db"
)

// WorkerHealth serves a worker process's /healthz, /readyz and /metrics
// (WORKER_ADDR): the API's answers to the first two, on the workers' pool,
// with readyDetail as the API's ReadyDetail. A failed probe is not logged:
// the worker's own work says that Postgres is down.
func WorkerHealth(pool *db.DB, readyDetail func() string, metrics http.Handler) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: Config{DB: pool, ReadyDetail: readyDetail}.withDefaults()}
	r := gin.New()
	s.health(r)
	r.GET("/metrics", gin.WrapH(metrics))
	r.HEAD("/metrics", gin.WrapH(metrics))
	return r
}

// health routes /healthz and /readyz. HEAD answers as GET without the
// body (net/http drops it), as load balancers and `curl -I` ask.
func (s *Server) health(r *gin.Engine) {
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.HEAD("/healthz", s.healthz)
	r.HEAD("/readyz", s.readyz)
}

// healthz handles GET and HEAD /healthz: the process is up.
func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz handles GET and HEAD /readyz: Postgres answers (503 with
// Retry-After otherwise), and what ReadyDetail says.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.DBTimeout)
	defer cancel()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		s.writeError(c, err)
		return
	}
	if s.cfg.ReadyDetail != nil {
		if detail := s.cfg.ReadyDetail(); detail != "" {
			c.JSON(http.StatusOK, gin.H{"status": "ok", "detail": detail})
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}
