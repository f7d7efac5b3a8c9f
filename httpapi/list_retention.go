package httpapi

import (
	"fmt"
	"time"
)

// days says d in days when it is whole days ("30 days"), else as Go does.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
