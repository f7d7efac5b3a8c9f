//go:build drills

package main

import (
	"strings"
	"testing"
	"time"
)

// drillDatabaseOutageLog: Postgres is out of a service's reach for 60 s
// (a proxy between them cut, outageDrill; the shared cluster keeps
// running). Its log says so in a few lines, and counts the failures that
// it held back (issue 36: 460 River lines, 7 "giving up" and 1,162 WARN
// lines for a 60-s outage).
func drillDatabaseOutageLog(t *testing.T, s *drillSet) {
	const drill = "Postgres out of reach for 60 s: the log"
	during, suppressed := outageDrill(t, 60*time.Second, 0)
	unreachable := len(during) > 0 && strings.Contains(during[0], "database unreachable since")
	s.check(t, drill, "lines from the cut until \"database reachable again\"", "≤ 10, the first \"database unreachable since\"",
		len(during) <= 10 && unreachable, "%d (%d held back and counted: the lines without the collapse)", len(during), suppressed)
}
