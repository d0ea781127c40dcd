package actors

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Overlaps of SPEC.md section 8: how long a replaced secret keeps working.
const (
	ClientSecretOverlap  = 24 * time.Hour
	SigningSecretOverlap = 7 * 24 * time.Hour
)

// Which secret of a Kit.
const (
	SecretClient  = "client"
	SecretSigning = "signing"
)

// NewKitSecret makes a new secret of the kind which (SecretClient or
// SecretSigning) and the hash a RotateKitSecret stores: the secret itself
// is shown once, by whoever asked (the operator API, the API access page).
func NewKitSecret(which string) (secret string, hash []byte) {
	prefix := ids.ClientSecret
	if which == SecretSigning {
		prefix = ids.SigningSecret
	}
	secret = ids.NewSecret(prefix)
	h := ids.Hash(secret)
	return secret, h[:]
}

// errInvalidClient is the one answer for a client id or secret that does
// not work: which of the two was wrong is not revealed.
var errInvalidClient = kiterr.New(kiterr.InvalidCredentials, "client credentials are not valid")

// handleSecrets answers the kit actor's secret requests; ok is false for any
// other request. The secrets are stored as hashes only (clientSecretKey,
// signingSecretKey), read on demand: they are rare next to the Kit's versions.
func (a *kitActor) handleSecrets(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.RotateKitSecret:
		r, err := a.rotateSecret(m)
		return r, true, err
	case *kitpb.CheckClientSecret:
		r, err := a.checkClientSecret(m)
		return r, true, err
	}
	return nil, false, nil
}

func (a *kitActor) secretKey(which string) ([]byte, time.Duration, error) {
	switch which {
	case SecretClient:
		return clientSecretKey(a.id), ClientSecretOverlap, nil
	case SecretSigning:
		return signingSecretKey(a.id), SigningSecretOverlap, nil
	}
	return nil, 0, fmt.Errorf("kit %s: unknown secret %q", a.id, which)
}

// rotateSecret makes secret_hash the current secret; the one it replaces
// keeps working for the overlap. A secret replaced before its own overlap
// ended is dropped: only one previous secret is kept.
func (a *kitActor) rotateSecret(m *kitpb.RotateKitSecret) (proto.Message, error) {
	k, overlap, err := a.secretKey(m.Which)
	if err != nil {
		return nil, err
	}
	cur := &kitpb.SecretState{}
	if _, err := load(a.env.Store, k, cur); err != nil {
		return nil, err
	}
	now := a.env.Clock.Now()
	next := &kitpb.SecretState{Hash: m.SecretHash, CreatedAt: nanos(now), Generation: cur.Generation + 1}
	if len(cur.Hash) > 0 {
		next.PreviousHash = cur.Hash
		next.PreviousExpiresAt = nanos(now.Add(overlap))
	}
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, m.Which+"_secret.rotated", "")
	e.Status = strconv.Itoa(int(next.Generation))
	b := a.env.Store.NewBatch()
	put(b, k, next)
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("rotate %s secret of %s: %w", m.Which, a.id, err)
	}
	return &kitpb.KitSecretReply{Secret: next}, nil
}

func (a *kitActor) checkClientSecret(m *kitpb.CheckClientSecret) (proto.Message, error) {
	cur := &kitpb.SecretState{}
	found, err := load(a.env.Store, clientSecretKey(a.id), cur)
	if err != nil {
		return nil, err
	}
	if !found || len(m.SecretHash) == 0 {
		return nil, errInvalidClient
	}
	if ids.Equal(cur.Hash, m.SecretHash) {
		return &kitpb.Ok{}, nil
	}
	if len(cur.PreviousHash) > 0 && ids.Equal(cur.PreviousHash, m.SecretHash) && nanos(a.env.Clock.Now()) < cur.PreviousExpiresAt {
		return &kitpb.Ok{}, nil
	}
	// A wrong secret for a Kit that has one is worth telling its developer
	// (a leaked client id being tried, or a deploy with the old secret).
	b := a.env.Store.NewBatch()
	e := newLogEntry(a.env, LogSourceAudit, LogLevelError, "token.refused", "")
	e.Status, e.ErrorCode = "client", "invalid_client_secret"
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("log refused client secret of %s: %w", a.id, err)
	}
	return nil, errInvalidClient
}
