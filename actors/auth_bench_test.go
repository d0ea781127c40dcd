package actors_test

import (
	"crypto/sha256"
	"testing"

	"github.com/kitd/kitd/actors"
)

// Token authentication on the request path. Target (docs/credentials.md
// "Authentication on the request path"): a cache hit
// adds under 2 µs and no allocation to a request.

func BenchmarkAuthenticate(b *testing.B) {
	n := shared
	w := n.workspace(b, 0)
	bt := n.bot(b, w.id, chatScopes)
	token := []byte(bt.token)
	hash := sha256.Sum256(token)

	b.Run("hit", func(b *testing.B) {
		if _, err := n.auth.Authenticate(token); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n.auth.Authenticate(token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := n.auth.Authenticate(token); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("miss", func(b *testing.B) {
		// Each round drops the cached principal first: a credential read
		// from Pebble plus one ask of the installation.
		b.ReportAllocs()
		for b.Loop() {
			n.auth.CredentialRevoked(hash[:])
			if _, err := n.auth.Authenticate(token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A cache hit allocates nothing: the hash is an array, the cache is keyed
// by it, and the principal is shared.
func TestAuthenticateCacheHitAllocatesNothing(t *testing.T) {
	n := shared
	w := n.workspace(t, 0)
	bt := n.bot(t, w.id, chatScopes)
	token := []byte(bt.token)
	if _, err := n.auth.Authenticate(token); err != nil {
		t.Fatal(err)
	}
	if allocs := actors.LeastAllocs(1000, func() {
		if _, err := n.auth.Authenticate(token); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("a cache hit allocates %v times, want 0", allocs)
	}
}
