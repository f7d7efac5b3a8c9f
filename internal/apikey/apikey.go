// Package apikey is the form of a caller's API key: how one is made, how
// it is recognised, and the hash it is stored and looked up by. The API's
// auth checks keys with it and the CLI's `apikey create` makes them, so
// the CLI needs nothing of the server to make one.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Prefix starts every key, so a leaked one is easy to recognise (and to
// find with secret scanners).
const Prefix = "dc_"

// randomBytes of randomness: 256 bits.
const randomBytes = 32

var length = len(Prefix) + base64.RawURLEncoding.EncodedLen(randomBytes)

// New returns a new key and the hash to store. The key is shown once.
func New() (key string, hash []byte) {
	b := make([]byte, randomBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	key = Prefix + base64.RawURLEncoding.EncodeToString(b)
	sum := Hash(key)
	return key, sum[:]
}

// Hash is the stored form of a key, the one it is looked up by.
func Hash(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// WellFormed reports whether key has the form New gives: the prefix and
// the length. A key that has not is refused without a look-up.
func WellFormed(key string) bool { return strings.HasPrefix(key, Prefix) && len(key) == length }
