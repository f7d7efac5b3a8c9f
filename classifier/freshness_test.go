package classifier_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
)

func TestWant_Accepts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	made := func(ago time.Duration) *classifier.Result {
		return &classifier.Result{Status: classifier.StatusCompleted, Confidence: 5, ClassifiedAt: now.Add(-ago)}
	}
	for _, c := range []struct {
		name string
		want classifier.Want
		r    *classifier.Result
		ok   bool
	}{
		{"no want: whatever the TTLs allow", classifier.Want{}, made(90 * 24 * time.Hour), true},
		{"younger than max_age", classifier.Want{MaxAge: time.Hour}, made(59 * time.Minute), true},
		{"as old as max_age", classifier.Want{MaxAge: time.Hour}, made(time.Hour), false},
		{"made before a refresh", classifier.Want{Since: now.Add(-time.Minute)}, made(2 * time.Minute), false},
		{"made after a refresh (by another request)", classifier.Want{Since: now.Add(-time.Minute)}, made(30 * time.Second), true},
		{"made at the refresh", classifier.Want{Since: now.Add(-time.Minute)}, made(time.Minute), true},
	} {
		require.Equal(t, c.ok, c.want.Accepts(c.r, now), c.name)
	}
}
