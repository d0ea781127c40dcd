// Package domainproof owns the proof that a Kit controls a domain
// (docs/decisions.md "Domains"): the domain name rules, which hosts a
// verified domain covers, the challenge and the proof it asks for, and the
// two checks of that proof, a DNS TXT record and an HTTPS well-known file.
//
// It never stores anything and never decides what a result means for a Kit:
// the kit actor records the outcome and the HTTP layer maps
// [ErrProofNotFound] to 409. DNS and HTTPS go through the [Resolver] and
// [Fetcher] interfaces, so tests hand in fakes or point [New] at the servers
// of package domainprooftest.
package domainproof

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// WellKnownPath is the path of the well-known proof on the domain's HTTPS
// origin.
const WellKnownPath = "/.well-known/kit-verification.json"

// maxWellKnownBody is the contract's bound on the well-known body: more is a
// failed proof, so a hostile server cannot make kitd read without end.
const maxWellKnownBody = 4 << 10

// ErrProofNotFound is wrapped by every failed check: the proof was absent,
// wrong, or could not be fetched. The cause stays in the error chain for logs;
// the HTTP layer answers 409 without repeating what was found.
var ErrProofNotFound = errors.New("proof not found")

// Resolver looks up DNS TXT records. LookupTXT returns every TXT string of
// name (the strings of one record joined, as net.Resolver does).
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// Fetcher GETs an https URL without following redirects. It reads at most
// max bytes of the body; a longer body is an error.
type Fetcher interface {
	Fetch(ctx context.Context, url string, max int64) (status int, body []byte, err error)
}

// Checker checks proofs through its Resolver and Fetcher; both must be set.
// [New] makes one that talks to the network.
type Checker struct {
	Resolver Resolver
	Fetcher  Fetcher
}

// CheckDNS returns nil when a TXT string of the proof's host equals the
// proof's value. The DNS proof does not name the Kit: the challenge is
// already unique to the Kit and domain, so kitID only keeps the two checks
// alike.
func (c *Checker) CheckDNS(ctx context.Context, kitID, domain, challenge string) error {
	d, ok := NormalizeDomain(domain)
	if !ok {
		return fmt.Errorf("check dns proof of %q: %w: not a valid domain", domain, ErrProofNotFound)
	}
	p := ProofFor(kitID, d, challenge).DNS
	txts, err := c.Resolver.LookupTXT(ctx, p.Host)
	if err != nil {
		return fmt.Errorf("check dns proof of %s: %w: look up TXT %s: %w", d, ErrProofNotFound, p.Host, err)
	}
	for _, s := range txts {
		if s == p.Value {
			return nil
		}
	}
	return fmt.Errorf("check dns proof of %s: %w: none of the %d TXT strings of %s is the challenge", d, ErrProofNotFound, len(txts), p.Host)
}

// CheckWellKnown returns nil when a GET of the proof's URL answers 200 with
// a JSON object (at most 4 KiB) whose "kitId" and "token" are the expected
// ones; other keys are ignored.
func (c *Checker) CheckWellKnown(ctx context.Context, kitID, domain, challenge string) error {
	d, ok := NormalizeDomain(domain)
	if !ok {
		return fmt.Errorf("check well-known proof of %q: %w: not a valid domain", domain, ErrProofNotFound)
	}
	p := ProofFor(kitID, d, challenge).WellKnown
	status, body, err := c.Fetcher.Fetch(ctx, p.URL, maxWellKnownBody)
	if err != nil {
		return fmt.Errorf("check well-known proof of %s: %w: %w", d, ErrProofNotFound, err)
	}
	if status != 200 {
		return fmt.Errorf("check well-known proof of %s: %w: GET %s answered %d", d, ErrProofNotFound, p.URL, status)
	}
	// Checked again here so that a Fetcher ignoring max cannot widen the
	// contract.
	if len(body) > maxWellKnownBody {
		return fmt.Errorf("check well-known proof of %s: %w: body over %d bytes", d, ErrProofNotFound, maxWellKnownBody)
	}
	if err := matchBody(body, p.Body); err != nil {
		return fmt.Errorf("check well-known proof of %s: %w: %w", d, ErrProofNotFound, err)
	}
	return nil
}

// matchBody decodes into a map rather than a struct because encoding/json
// matches struct fields case-insensitively: "KITID" must not count as
// "kitId".
func matchBody(body []byte, want WellKnownBody) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return fmt.Errorf("body is not a JSON object: %w", err)
	}
	for _, f := range []struct{ key, want string }{{"kitId", want.KitID}, {"token", want.Token}} {
		raw, ok := obj[f.key]
		if !ok {
			return fmt.Errorf("body has no %q", f.key)
		}
		var got string
		if err := json.Unmarshal(raw, &got); err != nil {
			return fmt.Errorf("body %q is not a string", f.key)
		}
		if got != f.want {
			return fmt.Errorf("body %q is not the expected one", f.key)
		}
	}
	return nil
}
