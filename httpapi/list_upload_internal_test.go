package httpapi

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/domainclass/domainclass/classifier"
)

// Keys stored before tier, the column mapping (and max_age and refresh)
// were in the fingerprint keep replaying the requests that did not use
// them.
func TestListFingerprint_KeysOfEarlierRequestsStayValid(t *testing.T) {
	t.Parallel()
	body := sha256.New()
	body.Write([]byte("domain\nacme.com\n"))
	old, _ := json.Marshal([]any{"list", "cpg", formatCSV, "https://example.com/h", body.Sum(nil)})
	want := sha256.Sum256(old)
	req := listRequest{cls: &classifier.Classifier{Name: "cpg"}, format: formatCSV, callbackURL: "https://example.com/h",
		tier: classifier.TierStandard, columns: csvColumns{Domain: "Domain", Ref: "REF"}}
	require.Equal(t, want[:], listFingerprint(req, body), "the defaults, named or not")
}
