package httpapi

import (
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// allowedMethods lists the methods routes have for path, for the Allow
// header of a 405 (RFC 9110 requires it): "GET, POST".
func allowedMethods(routes gin.RoutesInfo, path string) string {
	var methods []string
	for _, r := range routes {
		if routeMatches(r.Path, path) && !slices.Contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

// routeMatches reports whether path is one of gin's route pattern: a
// ":name" segment matches any non-empty segment, a "*name" the rest.
func routeMatches(pattern, path string) bool {
	want, got := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, seg := range want {
		switch {
		case strings.HasPrefix(seg, "*"):
			return true
		case i >= len(got):
			return false
		case strings.HasPrefix(seg, ":"):
			if got[i] == "" {
				return false
			}
		case seg != got[i]:
			return false
		}
	}
	return len(want) == len(got)
}
