package actors_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// Signing secrets are kept sealed, never as they are, and answered to the
// sender while valid: the current one, and the previous one for 7 days.
func TestSigningSecretsAreSealedAndAnsweredWhileValid(t *testing.T) {
	n := ownNode(t)
	n.env.SecretKey = bytes.Repeat([]byte{7}, 32)
	ws := n.workspace(t, 1)
	kit := n.mustUpload(t, ws.id, manifestJSON(newSlug(), "1.0.0"), false).Kit.Id
	rotate := func() string {
		secret := ids.NewSecret(ids.SigningSecret)
		h := ids.Hash(secret)
		ask[*kitpb.KitSecretReply](t, n, actors.KindKit, kit, &kitpb.RotateKitSecret{Which: actors.SecretSigning, SecretHash: h[:], Secret: secret})
		return secret
	}
	secrets := func() []string {
		return ask[*kitpb.SigningSecretsReply](t, n, actors.KindKit, kit, &kitpb.GetSigningSecrets{}).Secrets
	}
	first := rotate()
	second := rotate()
	for _, tc := range []struct {
		name    string
		advance time.Duration
		want    []string
	}{
		{"both secrets, newest first, during the overlap", 0, []string{second, first}},
		{"the current one alone after the overlap", actors.SigningSecretOverlap + time.Second, []string{second}},
	} {
		n.clk.Advance(tc.advance)
		if got := secrets(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %d secrets", tc.name, len(got))
		}
	}
	noErr(t, n.store.Scan(nil, nil, false, func(k, v []byte) bool {
		if bytes.Contains(v, []byte(second)) || bytes.Contains(v, []byte(first)) {
			t.Errorf("%q holds a signing secret as it is", k)
		}
		return true
	}))
}
