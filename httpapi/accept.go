package httpapi

import (
	"slices"
	"strconv"
	"strings"
)

// acceptQuality is the quality Accept gives the media type typ/sub (sub
// any of subs): that of the most specific range matching it, the highest
// of equally specific ones; 0 when none matches. A range whose q is not a
// number from 0 to 1 is ignored.
func acceptQuality(accept, typ string, subs ...string) float64 {
	best, q := 0, 0.0 // best: 3 typ/sub, 2 typ/*, 1 */*
	for part := range strings.SplitSeq(accept, ",") {
		mediaRange, params, _ := strings.Cut(part, ";")
		t, sub, ok := strings.Cut(strings.ToLower(strings.TrimSpace(mediaRange)), "/")
		if !ok {
			continue
		}
		t, sub = strings.TrimSpace(t), strings.TrimSpace(sub)
		specific := 0
		switch {
		case t == typ && slices.Contains(subs, sub):
			specific = 3
		case t == typ && sub == "*":
			specific = 2
		case t == "*" && sub == "*":
			specific = 1
		}
		if specific == 0 || specific < best {
			continue
		}
		weight, ok := qValue(params)
		if !ok {
			continue
		}
		if specific > best {
			best, q = specific, weight
		} else {
			q = max(q, weight)
		}
	}
	return q
}

// qValue reads the q parameter of a media range's parameters (1 without
// one); false when it is not a number from 0 to 1.
func qValue(params string) (float64, bool) {
	for param := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(param, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || q < 0 || q > 1 {
			return 0, false
		}
		return q, true
	}
	return 1, true
}
