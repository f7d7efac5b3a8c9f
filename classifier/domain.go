package classifier

import (
	"errors"
	"net/netip"
	"strings"
	"unicode"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Reasons a domain input is rejected. They are shown to callers as the
// "reason" of an item error, so they are stable, lower-case phrases.
const (
	ReasonEmpty         = "empty input"
	ReasonIPAddress     = "is an IP address, not a domain"
	ReasonLocalhost     = "localhost is not a company domain"
	ReasonSingleLabel   = "a single label is not a public domain"
	ReasonUnknownTLD    = "unknown top-level domain"
	ReasonBadCharacters = "contains characters not allowed in a domain name"
	ReasonLabelLength   = "a label is empty or longer than 63 characters"
	ReasonDomainLength  = "longer than 253 characters"
	ReasonWildcard      = "wildcards are not allowed"
	ReasonPublicSuffix  = "is a public suffix, not a company domain"
	ReasonBadHyphen     = "a label starts or ends with a hyphen"
	ReasonBadPort       = "has an invalid port"
	ReasonBadIDN        = "is not a valid internationalized domain name"
	ReasonInputTooLong  = "longer than 2048 characters"
	ReasonControlChars  = "contains control characters"
)

const (
	maxDomainLength      = 253
	maxLabelLength       = 63
	maxInputLength       = 2048
	schemeSeparator      = "://"
	protocolRelativeHead = "//"
)

// DomainError says why an input could not be normalized.
type DomainError struct {
	Input  string
	Reason string
}

func (e *DomainError) Error() string { return e.Input + ": " + e.Reason }

// idnaProfile maps Unicode input the way browsers look names up (UTS #46,
// case folding, full-width dots) and refuses anything outside LDH + IDN.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.StrictDomainName(true),
	idna.ValidateLabels(true),
	idna.Transitional(false),
)

// NormalizeDomain reduces a caller's input (a bare domain, a host or a URL)
// to its registrable domain in ASCII: "https://Shop.Example.co.uk:8443/a?b"
// becomes "example.co.uk", "münchen.de" becomes "xn--mnchen-3ya.de".
//
// It trims; lowercases; strips scheme, userinfo, port, path, query, fragment
// and one trailing dot; converts IDN to punycode; and keeps the public suffix
// plus one label, using the Public Suffix List (its private section too, so
// "acme.github.io" stays a domain of its own). It returns a *DomainError for
// empty input, control characters anywhere, IP addresses, localhost, single
// labels, unknown top-level domains, bad characters or label lengths,
// wildcards and bare public suffixes. NormalizeDomain(NormalizeDomain(x)) == NormalizeDomain(x).
func NormalizeDomain(input string) (string, error) {
	reject := func(reason string) (string, error) {
		return "", &DomainError{Input: input, Reason: reason}
	}

	s := strings.TrimSpace(input)
	switch {
	case s == "":
		return reject(ReasonEmpty)
	case len(s) > maxInputLength:
		return reject(ReasonInputTooLong)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		// Even in a path, which is dropped: the input itself is stored and
		// shown back, and Postgres refuses a NUL in text.
		return reject(ReasonControlChars)
	case strings.Contains(s, "*"):
		return reject(ReasonWildcard)
	}

	host, ok := hostOf(s)
	if !ok {
		return reject(ReasonBadPort)
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return reject(ReasonEmpty)
	}
	if isIPAddress(host) {
		return reject(ReasonIPAddress)
	}

	ascii, err := toASCII(host)
	if err != nil {
		return reject(idnaReason(host))
	}
	ascii = strings.TrimSuffix(ascii, ".") // a full-width trailing dot maps to "."
	if reason := checkLabels(ascii); reason != "" {
		return reject(reason)
	}

	tld := ascii[strings.LastIndexByte(ascii, '.')+1:]
	switch {
	case ascii == "localhost" || tld == "localhost":
		return reject(ReasonLocalhost)
	case isAllDigits(tld):
		return reject(ReasonIPAddress)
	case tld == ascii:
		return reject(ReasonSingleLabel)
	}
	if _, icann := publicsuffix.PublicSuffix(tld); !icann {
		return reject(ReasonUnknownTLD)
	}

	registrable, err := publicsuffix.EffectiveTLDPlusOne(ascii)
	if err != nil {
		return reject(ReasonPublicSuffix)
	}
	return registrable, nil
}

// toASCII is idnaProfile.ToASCII, without its cost for the names most
// inputs are: lowercase letters, digits, dots and single hyphens, which
// UTS #46 maps to themselves and whose validation (hyphens, lengths) is
// checkLabels's. A "--" anywhere (punycode's xn--, or a hyphen pair in
// positions 3–4, which the profile refuses) goes the long way. A test holds
// the two to the same answers.
func toASCII(host string) (string, error) {
	if isPlainLDH(host) {
		return host, nil
	}
	return idnaProfile.ToASCII(host)
}

func isPlainLDH(host string) bool {
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !isLDH(c) && c != '.' || c == '-' && i > 0 && host[i-1] == '-' {
			return false
		}
	}
	return true
}

// hostOf strips scheme, userinfo, path, query, fragment and port from s and
// lowercases what is left. It reports false for a port that is not a number.
func hostOf(s string) (string, bool) {
	if i := strings.Index(s, schemeSeparator); i >= 0 && isScheme(s[:i]) {
		s = s[i+len(schemeSeparator):]
	} else if strings.HasPrefix(s, protocolRelativeHead) {
		s = s[len(protocolRelativeHead):]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	if strings.HasPrefix(s, "[") { // an IPv6 literal, with or without a port
		if end := strings.Index(s, "]"); end > 0 {
			return s[:end+1], true
		}
		return s, true
	}
	if strings.Count(s, ":") > 1 { // an unbracketed IPv6 literal has no port
		return strings.ToLower(s), true
	}
	if i := strings.LastIndex(s, ":"); i >= 0 {
		if !isAllDigits(s[i+1:]) && s[i+1:] != "" {
			return "", false
		}
		s = s[:i]
	}
	return strings.ToLower(s), true
}

func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func isIPAddress(host string) bool {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.Index(h, "%"); i >= 0 { // IPv6 zone
		h = h[:i]
	}
	// Without a colon only an IPv4 address parses, which is digits and
	// dots: most inputs are names, and skip the parser.
	if !strings.Contains(h, ":") && strings.IndexFunc(h, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) >= 0 {
		return false
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// idnaReason picks the most useful reason for an input the IDNA profile
// refused, by looking at what is in it.
func idnaReason(host string) string {
	if reason := checkLabels(host); reason != "" && reason != ReasonBadCharacters {
		return reason
	}
	for _, r := range host {
		if r < 0x80 && !isLDH(byte(r)) && r != '.' {
			return ReasonBadCharacters
		}
	}
	return ReasonBadIDN
}

// checkLabels validates an ASCII (or near-ASCII) name label by label.
func checkLabels(name string) string {
	if len(name) > maxDomainLength {
		return ReasonDomainLength
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > maxLabelLength {
			return ReasonLabelLength
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return ReasonBadHyphen
		}
		for i := 0; i < len(label); i++ {
			if !isLDH(label[i]) {
				return ReasonBadCharacters
			}
		}
	}
	return ""
}

func isLDH(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}

func isAllDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// DomainInput pairs what a caller sent with its normalized domain.
type DomainInput struct {
	Input  string
	Domain string
}

// ItemError says why one input was rejected.
type ItemError struct {
	Input  string
	Reason string
}

// NormalizeDomains normalizes every input, keeps distinct domains in
// first-seen order (the first input wins), and returns every rejected input
// with its reason.
func NormalizeDomains(inputs []string) ([]DomainInput, []ItemError) {
	var (
		out  []DomainInput
		bad  []ItemError
		seen = make(map[string]bool, len(inputs))
	)
	for _, in := range inputs {
		d, err := NormalizeDomain(in)
		if err != nil {
			reason := err.Error()
			if domErr := (*DomainError)(nil); errors.As(err, &domErr) {
				reason = domErr.Reason
			}
			bad = append(bad, ItemError{Input: in, Reason: reason})
			continue
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, DomainInput{Input: in, Domain: d})
		}
	}
	return out, bad
}
