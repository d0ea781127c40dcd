package blocks

import (
	"bytes"
	"net/url"
	"strconv"
)

// checkText checks decoded text b: min..max code points (never more than
// MaxTextChars) and no control characters other than \n and \t. Input is
// valid UTF-8 (tokenize guarantees it), so counting the bytes that do not
// continue a sequence counts code points. It returns the reason, or "".
func checkText(b []byte, min, max int) string {
	n := 0
	i := 0
	// Eight bytes at a time while they are printable ASCII, the common case.
	for ; i+8 <= len(b); i += 8 {
		x := uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24 |
			uint64(b[i+4])<<32 | uint64(b[i+5])<<40 | uint64(b[i+6])<<48 | uint64(b[i+7])<<56
		const lo7, ones, high = 0x7f7f7f7f7f7f7f7f, 0x0101010101010101, 0x8080808080808080
		low := ^((x & lo7) + 0x60*ones | x) & high // bytes below 0x20
		del := ((x & lo7) + ones | x) & high       // 0x7f and non-ASCII
		if low|del != 0 {
			break
		}
		n += 8
	}
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			return ctrlReason
		case c == 0xc2 && i+1 < len(b) && b[i+1] < 0xa0:
			// U+0080..U+009F, the C1 controls.
			return ctrlReason
		}
		if c&0xc0 != 0x80 {
			n++
		}
	}
	return lengthReason(n, min, max)
}

// lengthReason checks a length of n characters against min..max.
func lengthReason(n, min, max int) string {
	switch {
	case n < min && n == 0:
		return "must not be empty"
	case n < min:
		return "must be at least " + chars(min)
	case n > max:
		return "must be at most " + chars(max)
	}
	return ""
}

const ctrlReason = "must not contain control characters"

func chars(n int) string {
	if n == 1 {
		return "1 character"
	}
	return strconv.Itoa(n) + " characters"
}

func min2(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// checkMrkdwn checks the <...> constructs of mrkdwn text: only <@uuid>,
// <#uuid>, <https://url> and <https://url|label> exist; a literal < is
// written &lt;. Bold, italic, code and lists need no checking: they are
// plain characters that the client renders.
func checkMrkdwn(b []byte) string {
	for {
		k := bytes.IndexByte(b, '<')
		if k < 0 {
			return ""
		}
		b = b[k+1:]
		e := bytes.IndexByte(b, '>')
		if e < 0 || bytes.IndexByte(b[:e], '<') >= 0 {
			return "contains a < that does not start a mention or link (write &lt; for a literal <)"
		}
		inner := b[:e]
		b = b[e+1:]
		if len(inner) > 0 && (inner[0] == '@' || inner[0] == '#') {
			if !isUUID(inner[1:]) {
				return "contains a mention whose id is not a UUID"
			}
			continue
		}
		link := inner
		if p := bytes.IndexByte(inner, '|'); p >= 0 {
			link = inner[:p]
			if p == len(inner)-1 {
				return "contains a link with an empty label"
			}
		}
		switch checkURL(link) {
		case urlOK:
		case urlNotHTTPS:
			return "contains a link whose scheme is not https"
		case urlNoHost:
			return "contains a link without a host"
		case urlUserinfo:
			return "contains a link with user information"
		default:
			return "contains an unsupported <...> construct"
		}
	}
}

type urlProblem uint8

const (
	urlOK urlProblem = iota
	urlInvalid
	urlNotHTTPS
	urlNoHost
	urlUserinfo
)

// checkURL accepts absolute https URLs with a host and without user
// information. The scheme is read before parsing so that javascript:,
// mailto: and the like are named as wrong schemes rather than bad URLs.
func checkURL(b []byte) urlProblem {
	for _, c := range b {
		if c <= ' ' || c == 0x7f {
			return urlInvalid
		}
	}
	i := 0
	for i < len(b) && (isAlpha(b[i]) || i > 0 && (isDigit(b[i]) || b[i] == '+' || b[i] == '-' || b[i] == '.')) {
		i++
	}
	if i == 0 || i >= len(b) || b[i] != ':' {
		return urlInvalid
	}
	if !bytes.EqualFold(b[:i], []byte("https")) {
		return urlNotHTTPS
	}
	u, err := url.Parse(string(b))
	switch {
	case err != nil || u.Opaque != "":
		return urlInvalid
	case u.User != nil:
		return urlUserinfo
	case u.Hostname() == "":
		return urlNoHost
	}
	return urlOK
}

// urlReason is the reason for a URL field.
func urlReason(p urlProblem) string {
	switch p {
	case urlOK:
		return ""
	case urlNotHTTPS:
		return "must use the https scheme"
	case urlNoHost:
		return "must be an https URL with a host"
	case urlUserinfo:
		return "must not contain user information"
	}
	return "must be a valid https URL"
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isUUID accepts the canonical lowercase form that the API itself returns.
func isUUID(b []byte) bool {
	if len(b) != 36 {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isDigit(c) && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// identLike matches ^[A-Za-z][A-Za-z0-9_]{0,39}$: metric and column keys.
func identLike(b []byte) bool {
	if len(b) == 0 || len(b) > 40 || !isAlpha(b[0]) {
		return false
	}
	for _, c := range b[1:] {
		if !isAlpha(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// Character sets of blockId (^[A-Za-z0-9_.-]{1,64}$) and actionId
// (^[A-Za-z0-9_.:-]{1,255}$).
var blockIDChars, actionIDChars = func() (b, a [256]bool) {
	for c := 0; c < 256; c++ {
		b[c] = isAlpha(byte(c)) || isDigit(byte(c)) || c == '_' || c == '.' || c == '-'
		a[c] = b[c] || c == ':'
	}
	return b, a
}()

func matchSet(b []byte, set *[256]bool, max int) bool {
	if len(b) == 0 || len(b) > max {
		return false
	}
	for _, c := range b {
		if !set[c] {
			return false
		}
	}
	return true
}
