package domainproof

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// Proof is the "proof" object of a Domain (docs/api.md "Domain"): what the Kit
// must publish for each method.
type Proof struct {
	DNS       DNSProof       `json:"dns"`
	WellKnown WellKnownProof `json:"wellKnown"`
}

// DNSProof is a TXT record: any TXT string of Host equal to Value proves the
// domain.
type DNSProof struct {
	Type  string `json:"type"`
	Host  string `json:"host"`
	Value string `json:"value"`
}

// WellKnownProof is a file on the domain's HTTPS origin: URL must answer 200
// with a JSON object holding Body's fields.
type WellKnownProof struct {
	URL  string        `json:"url"`
	Body WellKnownBody `json:"body"`
}

// WellKnownBody holds the fields the well-known JSON object must have.
type WellKnownBody struct {
	KitID string `json:"kitId"`
	Token string `json:"token"`
}

// ProofFor returns the proof of domain (already normalized) for the Kit's
// challenge.
func ProofFor(kitID, domain, challenge string) Proof {
	return Proof{
		DNS: DNSProof{
			Type:  "TXT",
			Host:  "_kit-challenge." + domain,
			Value: "kit-verification=" + challenge,
		},
		WellKnown: WellKnownProof{
			URL:  "https://" + domain + WellKnownPath,
			Body: WellKnownBody{KitID: kitID, Token: challenge},
		},
	}
}

// NewChallenge returns a random 256-bit value in base64url without padding
// (43 characters). It is not a secret: it is published in DNS.
func NewChallenge() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make domain challenge: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
