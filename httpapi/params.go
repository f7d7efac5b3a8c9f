package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/domainclass/domainclass/classifier"
)

// firstOf is a query parameter's first value, "" when it has none.
func firstOf(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// tierParam reads ?tier=standard|economy (standard when absent).
func tierParam(q map[string][]string) (string, error) {
	switch t := firstOf(q["tier"]); t {
	case "", classifier.TierStandard:
		return classifier.TierStandard, nil
	case classifier.TierEconomy:
		return t, nil
	default:
		return "", &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("tier must be standard or economy, not %q.", t)}
	}
}

func boolParam(q map[string][]string, name string) (bool, error) {
	v := firstOf(q[name])
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be true or false, not %q.", name, v)}
	}
	return b, nil
}

// maxRowParam bounds a row number in a query (?after=): rows are numbered
// in Postgres's int4, and a larger number, read as Go's int, could not be
// sent to it (the stream was cut off with a 200 already out).
const maxRowParam = math.MaxInt32

// intParam reads a query parameter that is a whole number from 0 to max,
// decimal digits only; 0 when absent. Anything else is a 400 naming it.
func intParam(q map[string][]string, name string, max int) (int, error) {
	vs := q[name]
	if len(vs) == 0 || vs[0] == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(vs[0], 10, 63)
	if err != nil || n > uint64(max) {
		return 0, &problem{status: http.StatusBadRequest, slug: "invalid-query",
			detail: fmt.Sprintf("%s must be a row number from 0 to %d, not %q.", name, max, classifier.Truncate(vs[0], 40))}
	}
	return int(n), nil
}

// rowStatuses are the statuses a list row is reported with.
var rowStatuses = []classifier.Status{classifier.StatusPending, classifier.StatusCompleted, classifier.StatusFailed,
	classifier.StatusRejected, classifier.StatusCancelled}

func statusParam(q map[string][]string) ([]classifier.Status, error) {
	var out []classifier.Status
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			st := classifier.Status(strings.ToUpper(strings.TrimSpace(s)))
			if st == "" {
				continue
			}
			if !slices.Contains(rowStatuses, st) {
				return nil, &problem{status: http.StatusBadRequest, slug: "invalid-query",
					detail: fmt.Sprintf("status %q is not one of PENDING, COMPLETED, FAILED, REJECTED, CANCELLED.", s)}
			}
			out = append(out, st)
		}
	}
	return out, nil
}
