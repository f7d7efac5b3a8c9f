package jobs

import "github.com/google/uuid"

// GateHeld is how many calls list id's open gate transaction holds:
// admitted, or waiting for its opening (0: none open).
func GateHeld(g *ListGates, id uuid.UUID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.open[id]; t != nil {
		return t.held
	}
	return 0
}
