package apikey_test

import (
	"bytes"
	"testing"

	"github.com/domainclass/domainclass/internal/apikey"
)

// TestNew: a new key has the form the auth accepts, its hash is the one
// the auth looks it up by, and two keys differ.
func TestNew(t *testing.T) {
	t.Parallel()
	key, hash := apikey.New()
	if !apikey.WellFormed(key) {
		t.Fatalf("New gave %q, which WellFormed refuses", key)
	}
	if sum := apikey.Hash(key); !bytes.Equal(hash, sum[:]) {
		t.Fatalf("New's hash %x is not Hash(key) %x: the key would never be found", hash, sum)
	}
	if other, _ := apikey.New(); other == key {
		t.Fatal("two keys are the same")
	}
	for _, bad := range []string{"", key[:len(key)-1], key + "x", "xx_" + key[3:], "Bearer " + key} {
		if apikey.WellFormed(bad) {
			t.Errorf("WellFormed(%q) = true, want false", bad)
		}
	}
}
