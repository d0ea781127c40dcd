package actors_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/proto/kitpb"
)

func TestUnverifiedHosts(t *testing.T) {
	tests := []struct {
		name     string
		hosts    []string
		verified []string
		want     []string
	}{
		{"no verified domain: every host", []string{"a.example.com", "b.example.org"}, nil, []string{"a.example.com", "b.example.org"}},
		{"a domain covers itself", []string{"example.com"}, []string{"example.com"}, []string{}},
		{"a domain covers its subdomains", []string{"api.example.com", "deep.api.example.com"}, []string{"example.com"}, []string{}},
		{"a subdomain does not cover its parent", []string{"example.com"}, []string{"api.example.com"}, []string{"example.com"}},
		{"a shared suffix is not a subdomain", []string{"badexample.com"}, []string{"example.com"}, []string{"badexample.com"}},
		{"an IP literal is never covered", []string{"2001:db8::1"}, []string{"example.com"}, []string{"2001:db8::1"}},
		{"only the uncovered hosts, in order", []string{"a.example.com", "x.other.net", "b.example.com"}, []string{"example.com"}, []string{"x.other.net"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := actors.UnverifiedHosts(tc.hosts, tc.verified); !slices.Equal(got, tc.want) {
				t.Fatalf("UnverifiedHosts(%q, %q) = %q, want %q", tc.hosts, tc.verified, got, tc.want)
			}
		})
	}
}

func TestKitDomains(t *testing.T) {
	n := shared
	add := func(ws, kit, domain, method, challenge string) (*kitpb.DomainReply, error) {
		return try[*kitpb.DomainReply](n, actors.KindKit, kit, &kitpb.AddDomain{WorkspaceId: ws, Domain: domain, Method: method, Challenge: challenge})
	}
	record := func(ws, kit, domain, challenge string, ok bool) (*kitpb.DomainReply, error) {
		return try[*kitpb.DomainReply](n, actors.KindKit, kit, &kitpb.RecordDomainCheck{WorkspaceId: ws, Domain: domain, Challenge: challenge, Ok: ok})
	}
	newKit := func(t *testing.T) (ws, kit string) {
		w := n.workspace(t, 1)
		r := n.mustUpload(t, w.id, manifestJSON(newSlug(), "1.0.0"), false)
		return w.id, r.Kit.Id
	}
	tests := []struct {
		name string
		run  func(t *testing.T, ws, kit string)
	}{
		{"a failed check leaves the domain unverified", func(t *testing.T, ws, kit string) {
			_, err := add(ws, kit, "example.com", actors.DomainMethodDNS, "c1")
			noErr(t, err)
			r, err := record(ws, kit, "example.com", "c1", false)
			noErr(t, err)
			if r.Domain.Verified {
				t.Fatal("verified after a failed check")
			}
		}},
		{"a check of an old challenge proves nothing (the domain was removed and added again)", func(t *testing.T, ws, kit string) {
			_, err := add(ws, kit, "example.com", actors.DomainMethodDNS, "old")
			noErr(t, err)
			_, err = try[*kitpb.Ok](n, actors.KindKit, kit, &kitpb.RemoveDomain{WorkspaceId: ws, Domain: "example.com"})
			noErr(t, err)
			_, err = add(ws, kit, "example.com", actors.DomainMethodDNS, "new")
			noErr(t, err)
			_, err = record(ws, kit, "example.com", "old", true)
			wantCode(t, err, kiterr.NotFound)
			d, err := try[*kitpb.DomainReply](n, actors.KindKit, kit, &kitpb.GetDomain{WorkspaceId: ws, Domain: "example.com"})
			noErr(t, err)
			if d.Domain.Verified || d.Domain.Challenge != "new" {
				t.Fatalf("domain %v", d.Domain)
			}
		}},
		{"a passed check verifies once; the time stays", func(t *testing.T, ws, kit string) {
			_, err := add(ws, kit, "example.com", actors.DomainMethodWellKnown, "c")
			noErr(t, err)
			first, err := record(ws, kit, "example.com", "c", true)
			noErr(t, err)
			again, err := record(ws, kit, "example.com", "c", false)
			noErr(t, err)
			if !first.Domain.Verified || first.Domain.VerifiedAt == 0 || !again.Domain.Verified || again.Domain.VerifiedAt != first.Domain.VerifiedAt {
				t.Fatalf("first %v, again %v", first.Domain, again.Domain)
			}
		}},
		{"adding again keeps the challenge; a new method replaces the old", func(t *testing.T, ws, kit string) {
			_, err := add(ws, kit, "example.com", actors.DomainMethodDNS, "c")
			noErr(t, err)
			r, err := add(ws, kit, "example.com", actors.DomainMethodWellKnown, "other")
			noErr(t, err)
			if r.Created || r.Domain.Challenge != "c" || r.Domain.Method != actors.DomainMethodWellKnown {
				t.Fatalf("re-add %v", r)
			}
		}},
		{"at most MaxKitDomains", func(t *testing.T, ws, kit string) {
			for i := range actors.MaxKitDomains {
				_, err := add(ws, kit, fmt.Sprintf("d%d.example.com", i), actors.DomainMethodDNS, "c")
				noErr(t, err)
			}
			_, err := add(ws, kit, "one-more.example.com", actors.DomainMethodDNS, "c")
			wantCode(t, err, kiterr.Conflict)
		}},
		{"another workspace gets not_found for every domain request", func(t *testing.T, ws, kit string) {
			other := n.workspace(t, 1).id
			_, err := add(other, kit, "example.com", actors.DomainMethodDNS, "c")
			wantCode(t, err, kiterr.NotFound)
			_, err = add(ws, kit, "example.com", actors.DomainMethodDNS, "c")
			noErr(t, err)
			_, err = record(other, kit, "example.com", "c", true)
			wantCode(t, err, kiterr.NotFound)
			_, err = try[*kitpb.Ok](n, actors.KindKit, kit, &kitpb.RemoveDomain{WorkspaceId: other, Domain: "example.com"})
			wantCode(t, err, kiterr.NotFound)
		}},
		{"the Kit detail lists domains in domain order", func(t *testing.T, ws, kit string) {
			for _, d := range []string{"b.example.com", "a.example.com", "c.example.com"} {
				_, err := add(ws, kit, d, actors.DomainMethodDNS, "c")
				noErr(t, err)
			}
			r, err := try[*kitpb.KitDetailReply](n, actors.KindKit, kit, &kitpb.GetKitDetail{WorkspaceId: ws})
			noErr(t, err)
			var got []string
			for _, d := range r.Domains {
				got = append(got, d.Domain)
			}
			if !slices.Equal(got, []string{"a.example.com", "b.example.com", "c.example.com"}) {
				t.Fatalf("domains %q", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, kit := newKit(t)
			tc.run(t, ws, kit)
		})
	}
}
