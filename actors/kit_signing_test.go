package actors_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// Signing secrets are kept sealed, never as they are, and answered to the
// sender while valid: the current one, and the previous one for 7 days.
// sealingKit is a node of the test's own that seals signing secrets, with
// a workspace and a Kit of it that has none yet.
func sealingKit(t *testing.T) (n *testNode, ws *workspace, kit string) {
	t.Helper()
	n = ownNode(t)
	n.env.SealKey = bytes.Repeat([]byte{7}, 32)
	n.env.OpenKeys = [][]byte{n.env.SealKey}
	ws = n.workspace(t, 1)
	return n, ws, n.mustUpload(t, ws.id, manifestJSON(newSlug(), "1.0.0"), false).Kit.Id
}

func TestSigningSecretsAreSealedAndAnsweredWhileValid(t *testing.T) {
	n, _, kit := sealingKit(t)
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

// The first signing secret, made by a dev-install, is answered at once,
// also by a Kit actor that answered "none" before: the sender asks on
// every event, so the actor outlived the answer, which every delivery
// then failed on.
func TestADevInstallsFirstSigningSecretIsAnsweredAtOnce(t *testing.T) {
	n, ws, kit := sealingKit(t)
	secrets := func() []string {
		return ask[*kitpb.SigningSecretsReply](t, n, actors.KindKit, kit, &kitpb.GetSigningSecrets{}).Secrets
	}
	if got := secrets(); len(got) != 0 {
		t.Fatalf("a Kit without a signing secret answered %d", len(got))
	}
	secret := ids.NewSecret(ids.SigningSecret)
	h := ids.Hash(secret)
	r := ask[*kitpb.DevInstalledReply](t, n, actors.KindKit, kit, &kitpb.DevInstalled{
		WorkspaceId: ws.id, Version: "1.0.0", InstallationId: ids.New(), SigningSecretHash: h[:], SigningSecret: secret})
	if r.SigningSecret == nil {
		t.Fatal("the dev-install made no signing secret")
	}
	if got := secrets(); !slices.Equal(got, []string{secret}) {
		t.Fatalf("after the dev-install the Kit answered %d signing secrets, want the new one", len(got))
	}
}

// A sealed signing secret is a replicated record: a node of the same
// cluster opens it once the Kit's partition is led there, because every
// member seals with the key of the cluster key; a secret a node sealed
// with its own key before that still opens on that node, and on no other.
func TestSigningSecretsOpenOnEveryNodeOfTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	// Each node derives the key itself, from the cluster key alone.
	derive := func(clusterKey string) []byte {
		k, err := actors.ClusterSealKey(clusterKey)
		noErr(t, err)
		return k
	}
	ownA, ownB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	// Node A makes two Kits and seals a signing secret of each; the store
	// it leaves stands for the replica every other node holds.
	fs := vfs.NewMem()
	a, err := startNode(fs, nil)
	noErr(t, err)
	ws := a.workspace(t, 1)
	sealOnA := func(seal []byte) (kit, secret string) {
		kit = a.mustUpload(t, ws.id, manifestJSON(newSlug(), "1.0.0"), false).Kit.Id
		a.env.SealKey, a.env.OpenKeys = seal, [][]byte{seal}
		secret = ids.NewSecret(ids.SigningSecret)
		h := ids.Hash(secret)
		ask[*kitpb.KitSecretReply](t, a, actors.KindKit, kit, &kitpb.RotateKitSecret{Which: actors.SecretSigning, SecretHash: h[:], Secret: secret})
		return kit, secret
	}
	byCluster, byClusterSecret := sealOnA(derive("the cluster key"))
	byOwn, byOwnSecret := sealOnA(ownA) // as A sealed before the cluster key did
	noErr(t, a.stop())

	for _, tc := range []struct {
		name string
		kit  string
		// The opening node's cluster key, and its own secret key.
		clusterKey string
		own        []byte
		want       string // "": no secret opens
	}{
		{"another node of the cluster opens what the cluster key sealed", byCluster, "the cluster key", ownB, byClusterSecret},
		{"the sealing node opens what the cluster key sealed", byCluster, "the cluster key", ownA, byClusterSecret},
		{"a node of another cluster does not open it", byCluster, "another cluster key", ownB, ""},
		{"the node opens what its own key sealed, after the cluster key failed", byOwn, "the cluster key", ownA, byOwnSecret},
		{"another node does not open what a node's own key sealed", byOwn, "the cluster key", ownB, ""},
	} {
		n, err := startNode(fs, nil)
		noErr(t, err)
		n.env.SealKey = derive(tc.clusterKey)
		n.env.OpenKeys = [][]byte{n.env.SealKey, tc.own}
		r, err := try[*kitpb.SigningSecretsReply](n, actors.KindKit, tc.kit, &kitpb.GetSigningSecrets{})
		switch {
		case tc.want != "" && (err != nil || !slices.Equal(r.Secrets, []string{tc.want})):
			t.Errorf("%s: got %d secrets, err %v", tc.name, len(r.GetSecrets()), err)
		case tc.want == "" && err == nil:
			t.Errorf("%s: opened %d secrets, want an error", tc.name, len(r.Secrets))
		}
		noErr(t, n.stop())
	}
}
