// Package ids is kitd's one source of identifiers and secrets: time-ordered
// UUIDs for records, and random 256-bit bearer secrets with their SHA-256
// hashes (the only form in which secrets are stored).
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"

	"github.com/google/uuid"
)

// New returns a fresh UUIDv7: time-ordered, so ids sort by creation and make
// good Pebble keys.
func New() string {
	id, err := uuid.NewV7()
	if err != nil {
		// crypto/rand does not fail on supported platforms; an id source that
		// cannot produce ids leaves the server nothing sensible to do.
		panic(fmt.Sprintf("ids: %v", err))
	}
	return id.String()
}

// Valid reports whether s is a UUID in the canonical form ids take here:
// 36 characters, lower-case hex digits and four dashes (8-4-4-4-12), as
// New gives them. Another spelling of the same UUID (upper case, braces,
// a urn: prefix) names no record: keys hold ids as written, and
// docs/api.md says ids are compared exactly.
func Valid(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Secret prefixes of docs/api.md "Credentials".
const (
	BotToken       = "kbot_"
	UserToken      = "kusr_"
	RefreshToken   = "kref_"
	AuthCode       = "kcode_"
	ClientSecret   = "kcs_"
	SigningSecret  = "kss_"
	DeveloperToken = "kdev_"
	OperatorToken  = "kop_"
	SessionCookie  = "ksess_"
	// InstallLink is the secret of a Kit's install link (docs/decisions.md
	// "Install links"); the contract names the link, not its form.
	InstallLink = "kil_"
	// SignInChoice is a pending workspace choice of a sign-in whose
	// password matched in several workspaces (docs/decisions.md "Sign-in
	// without a workspace").
	SignInChoice = "ksic_"
)

// secretLen is the length of base64url (no padding) of 32 bytes.
const secretLen = 43

// NewSecret returns prefix followed by base64url of 256 random bits.
func NewSecret(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("ids: %v", err))
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// WellFormed reports whether s is prefix + 43 base64url characters.
func WellFormed(s, prefix string) bool {
	if len(s) != len(prefix)+secretLen || s[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Hash is the stored form of a secret.
func Hash(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// Equal compares two secret hashes in constant time.
func Equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
