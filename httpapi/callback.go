package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/domainclass/domainclass/classifier/netguard"
)

// MaxCallbackURLBytes is the longest X-Callback-URL accepted.
const MaxCallbackURLBytes = 2048

// callbackURL reads an X-Callback-URL header: "" when there is none, else
// an absolute https URL (http too when private addresses are allowed)
// without credentials, whose host is not a literal private, loopback,
// link-local or metadata address, nor localhost, unless those are allowed.
// A host that is not ASCII is read through IDNA (UTS 46) first and kept in
// its ASCII form. Names are checked again when a delivery connects. Otherwise
// it returns a 422 *problem: webhooks-not-configured when the service cannot
// sign callbacks, invalid-callback-url for a URL it will not call.
func (s *Server) callbackURL(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return "", nil
	}
	if !s.cfg.Webhooks {
		return "", &problem{status: http.StatusUnprocessableEntity, slug: "webhooks-not-configured",
			detail: "This service has no WEBHOOK_SECRET, so it cannot sign callbacks; leave out X-Callback-URL and poll the status URL."}
	}
	invalid := func(format string, args ...any) error {
		return &problem{status: http.StatusUnprocessableEntity, slug: "invalid-callback-url",
			detail: "X-Callback-URL " + fmt.Sprintf(format, args...)}
	}
	if len(h) > MaxCallbackURLBytes {
		return "", invalid("is longer than %d characters.", MaxCallbackURLBytes)
	}
	u, err := url.Parse(h)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", invalid("must be an absolute https URL, such as https://example.com/hooks/domainclass.")
	}
	if u.Scheme == "http" && !s.cfg.CallbackAllowPrivate {
		return "", invalid("must use https.")
	}
	if u.User != nil {
		return "", invalid("must not hold credentials; deliveries are authenticated by their signature.")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", invalid("has an invalid port %q.", p)
		}
	}
	host := u.Hostname()
	if !isASCII(host) {
		// Read as the transport will dial it (UTS 46, as net/http does), so
		// that 127。0。0。1 and ｌｏｃａｌｈｏｓｔ are checked as what they are,
		// and kept in that form: the delivery goes to the host checked here.
		ascii, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return "", invalid("has a host %q that is not a valid domain name (IDNA, UTS 46).", host)
		}
		if port := u.Port(); port != "" {
			u.Host = net.JoinHostPort(ascii, port)
		} else {
			u.Host = ascii
		}
		host, h = ascii, u.String()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if !strings.Contains(host, ":") && slices.Contains(strings.Split(host, "."), "") {
		return "", invalid("has an empty label in its host %q.", u.Hostname())
	}
	if err := netguard.CheckHost(host, s.cfg.CallbackAllowPrivate); err != nil {
		return "", invalid("points at a private, loopback or link-local address (%s); callbacks go to public internet addresses only.", host)
	}
	return h, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
