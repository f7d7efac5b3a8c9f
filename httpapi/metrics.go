package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP metrics: requests and durations by route and code.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "domainclass_http_requests_total",
			Help: "HTTP requests answered, by method (other: not a standard one), route (the pattern, not the path; unmatched) and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "domainclass_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method, route and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route", "code"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched" // keep arbitrary paths out of the label set
	}
	method, code := methodLabel(c.Request.Method), strconv.Itoa(c.Writer.Status())
	m.requests.WithLabelValues(method, route, code).Inc()
	m.duration.WithLabelValues(method, route, code).Observe(time.Since(start).Seconds())
}

// methodLabel keeps the method label to a fixed set: a request's method is
// any token its sender chose, and every new label value is a new series
// held in memory and sent on every scrape.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}
