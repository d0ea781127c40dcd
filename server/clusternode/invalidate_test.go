package clusternode

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kitd/kitd/actors"
)

// told records what an Invalidator was told, one line a call.
type told struct{ calls []string }

func (t *told) InstallationChanged(id string) { t.add("installation", id) }
func (t *told) CredentialRevoked(hash []byte) { t.add("credential", fmt.Sprintf("%x", hash)) }
func (t *told) UserChanged(id string)         { t.add("user", id) }
func (t *told) SessionEnded(id string)        { t.add("session", id) }
func (t *told) SigningSecretsChanged(kitID string) {
	t.add("signing", kitID)
}
func (t *told) KitVersionsChanged(kitID string) { t.add("kit_versions", kitID) }
func (t *told) KitStateChanged(kitID string)    { t.add("kit_state", kitID) }
func (t *told) add(kind, id string)             { t.calls = append(t.calls, kind+" "+id) }

// What another member says changed reaches this member's own caches, each
// kind as the call of actors.Invalidator it stands for.
func TestAnInvalidationReachesTheMembersCaches(t *testing.T) {
	hash := bytes.Repeat([]byte{0xab}, 32)
	for _, tc := range []struct {
		name, kind string
		id         []byte
		want       string // "": an error, nothing told
	}{
		{"an installation changed", "installation", []byte("i1"), "installation i1"},
		{"a credential revoked", "credential", hash, fmt.Sprintf("credential %x", hash)},
		{"a credential hash of another size is refused", "credential", []byte("short"), ""},
		{"a member deactivated", "user", []byte("u1"), "user u1"},
		{"a web session ended", "session", []byte("s1"), "session s1"},
		{"a Kit's signing secrets rotated", "signing", []byte("k1"), "signing k1"},
		{"a Kit's new latest version", "kit_versions", []byte("k1"), "kit_versions k1"},
		{"a Kit suspended or resumed", "kit_state", []byte("k1"), "kit_state k1"},
		{"an unknown kind is refused", "kit", []byte("k1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &told{}
			var local actors.Invalidator = got
			m := &Node{}
			m.local.Store(&local)
			err := m.invalidateHere(tc.kind, tc.id)
			switch {
			case tc.want == "" && (err == nil || len(got.calls) > 0):
				t.Fatalf("error %v, told %q; want an error and nothing told", err, got.calls)
			case tc.want != "" && (err != nil || len(got.calls) != 1 || got.calls[0] != tc.want):
				t.Fatalf("error %v, told %q; want %q", err, got.calls, tc.want)
			}
		})
	}
}
