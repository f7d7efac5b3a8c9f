//go:build bench || drills

package main

import (
	"os"
	"strconv"
	"time"
)

// envInt is the bench's and the drills' size setting name, def when unset
// or not a positive number.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envDuration is a duration setting name, def when unset or not positive.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
