package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// OpenAPI is the description of every public route, kept true by
// openapi_test.go.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openapiDoc handles GET /openapi.yaml.
func openapiDoc(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", OpenAPI)
}
