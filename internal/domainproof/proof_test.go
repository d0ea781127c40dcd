package domainproof_test

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/kitd/kitd/internal/domainproof"
)

func TestProofForHasTheSpecShape(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(domainproof.ProofFor("kit-1", "example.com", "abc"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"dns":{"type":"TXT","host":"_kit-challenge.example.com","value":"kit-verification=abc"},` +
		`"wellKnown":{"url":"https://example.com/.well-known/kit-verification.json","body":{"kitId":"kit-1","token":"abc"}}}`
	if string(got) != want {
		t.Errorf("ProofFor JSON =\n%s\nwant\n%s", got, want)
	}
}

func TestNewChallengeIs256BitBase64URL(t *testing.T) {
	t.Parallel()
	alphabet := regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 100 {
		c, err := domainproof.NewChallenge()
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(c) {
			t.Fatalf("challenge %q is not 43 base64url characters without padding", c)
		}
		if b, err := base64.RawURLEncoding.DecodeString(c); err != nil || len(b) != 32 {
			t.Fatalf("challenge %q decodes to %d bytes (%v), want 32", c, len(b), err)
		}
		if seen[c] {
			t.Fatalf("challenge %q came twice", c)
		}
		seen[c] = true
	}
}
