package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// longSearch is a fake Brave search whose five results carry long
// descriptions: prompts of about a thousand tokens.
func longSearch(t *testing.T) *httptest.Server {
	desc := strings.Repeat("Sells packaged snacks, drinks and household goods in supermarkets across Europe. ", 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		var results []map[string]string
		for i := range 5 {
			results = append(results, map[string]string{"title": fmt.Sprintf("%s page %d", q, i),
				"url": fmt.Sprintf("https://%s/p%d", q, i), "description": desc})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"web": map[string]any{"results": results}})
	}))
	t.Cleanup(srv.Close)
	return srv
}
