package actors

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/proto/kitpb"
)

// Overlaps of docs/api.md "Limits": how long a replaced secret keeps working.
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
// SecretSigning) and the request that makes it the Kit's. A client secret
// travels as its hash only; a signing secret also as itself, since
// deliveries are signed with it and the kit actor keeps it sealed.
func NewKitSecret(which string) (secret string, rotate *kitpb.RotateKitSecret) {
	prefix := ids.ClientSecret
	if which == SecretSigning {
		prefix = ids.SigningSecret
	}
	secret = ids.NewSecret(prefix)
	h := ids.Hash(secret)
	rotate = &kitpb.RotateKitSecret{Which: which, SecretHash: h[:]}
	if which == SecretSigning {
		rotate.Secret = secret
	}
	return secret, rotate
}

// errInvalidClient is the one answer for a client id or secret that does
// not work: which of the two was wrong is not revealed.
var errInvalidClient = kiterr.New(kiterr.InvalidCredentials, "client credentials are not valid")

// handleSecrets answers the kit actor's secret requests; ok is false for any
// other request. A client secret is stored as its hash only
// (clientSecretKey); a signing secret as its hash and, sealed with the
// sealing key (Env.SealKey), itself (signingSecretKey), since deliveries are signed
// with it (docs/credentials.md). The client secret is read on demand; the
// signing secret's sealed state is kept once read (a.signing), since every
// batch of deliveries asks for it.
func (a *kitActor) handleSecrets(msg proto.Message) (reply proto.Message, ok bool, err error) {
	switch m := msg.(type) {
	case *kitpb.RotateKitSecret:
		r, err := a.rotateSecret(m)
		return r, true, err
	case *kitpb.CheckClientSecret:
		r, err := a.checkClientSecret(m)
		return r, true, err
	case *kitpb.GetSigningSecrets:
		r, err := a.signingSecrets()
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
	if m.Which == SecretSigning {
		if next.Sealed, err = a.env.seal(m.Secret); err != nil {
			return nil, err
		}
	}
	if len(cur.Hash) > 0 {
		next.PreviousHash, next.PreviousSealed = cur.Hash, cur.Sealed
		next.PreviousExpiresAt = nanos(now.Add(overlap))
	}
	e := newLogEntry(a.env, LogSourceAudit, LogLevelInfo, m.Which+"_secret.rotated", "")
	e.Status = strconv.Itoa(int(next.Generation))
	b := a.env.newBatch()
	put(b, k, next)
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("rotate %s secret of %s: %w", m.Which, a.id, err)
	}
	if m.Which == SecretSigning {
		a.signing = next
		a.env.Invalidator.SigningSecretsChanged(a.id)
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
	if ids.Equal(cur.Hash, m.SecretHash) ||
		(len(cur.PreviousHash) > 0 && ids.Equal(cur.PreviousHash, m.SecretHash) && nanos(a.env.Clock.Now()) < cur.PreviousExpiresAt) {
		// Only a Kit that proved itself learns it is suspended: no code
		// or refresh token is spent, and the grant works after a resume.
		if a.kit.State == KitSuspended {
			return nil, ErrKitSuspended
		}
		return &kitpb.Ok{}, nil
	}
	// A wrong secret for a Kit that has one is worth telling its developer
	// (a leaked client id being tried, or a deploy with the old secret).
	b := a.env.newBatch()
	e := newLogEntry(a.env, LogSourceAudit, LogLevelError, "token.refused", "")
	e.Status, e.ErrorCode = "client", "invalid_client_secret"
	a.env.putLog(b, partition.Of(a.id), a.id, e)
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("log refused client secret of %s: %w", a.id, err)
	}
	return nil, errInvalidClient
}

// signingSecrets answers the valid signing secrets, newest first: the
// current one and, within its overlap, the previous one. A secret stored
// before secrets were sealed cannot be read back and is left out.
func (a *kitActor) signingSecrets() (proto.Message, error) {
	if a.signing == nil {
		cur := &kitpb.SecretState{}
		if _, err := load(a.env.Store, signingSecretKey(a.id), cur); err != nil {
			return nil, err
		}
		a.signing = cur
	}
	cur := a.signing
	reply := &kitpb.SigningSecretsReply{}
	sealed := [][]byte{cur.Sealed}
	if nanos(a.env.Clock.Now()) < cur.PreviousExpiresAt {
		sealed = append(sealed, cur.PreviousSealed)
	}
	for _, s := range sealed {
		if len(s) == 0 {
			continue
		}
		secret, err := a.env.open(s)
		if err != nil {
			return nil, fmt.Errorf("signing secret of %s: %w", a.id, err)
		}
		reply.Secrets = append(reply.Secrets, secret)
	}
	return reply, nil
}

// errNoSecretKey: the node has no key to seal signing secrets with.
var errNoSecretKey = errors.New("actors: no secret key to seal signing secrets")

// sealKeyInfo is HKDF's info for ClusterSealKey: a new use of the cluster
// key gets a new info, so no two uses share a derived key.
const sealKeyInfo = "kitd signing-secret seal v1"

// ClusterSealKey is the key every member of the cluster of clusterKey
// seals signing secrets with (HKDF-SHA256): a sealed secret is a
// replicated record, opened on whichever node leads the Kit's partition.
func ClusterSealKey(clusterKey string) ([]byte, error) {
	return hkdf.Key(sha256.New, []byte(clusterKey), nil, sealKeyInfo, 32)
}

// seal encrypts a signing secret under SealKey (AES-256-GCM, random nonce
// first). Signing needs the secret itself, so unlike every other secret
// it cannot be kept as a hash alone; the key lives outside the store
// (package server), so a copy of the store alone does not give it away. An
// empty secret seals to nothing.
func (env *Env) seal(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	aead, err := newAEAD(env.SealKey)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, []byte(secret), nil), nil
}

// open opens a sealed secret with the first of OpenKeys that does: GCM's
// authentication tells a wrong key apart.
func (env *Env) open(sealed []byte) (string, error) {
	if len(env.OpenKeys) == 0 {
		return "", errNoSecretKey
	}
	var err error
	for _, k := range env.OpenKeys {
		var aead cipher.AEAD
		if aead, err = newAEAD(k); err != nil {
			return "", err
		}
		n := aead.NonceSize()
		if len(sealed) < n {
			return "", errors.New("actors: sealed secret too short")
		}
		var plain []byte
		if plain, err = aead.Open(nil, sealed[:n], sealed[n:], nil); err == nil {
			return string(plain), nil
		}
	}
	return "", fmt.Errorf("actors: open sealed secret with any of %d keys: %w", len(env.OpenKeys), err)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) == 0 {
		return nil, errNoSecretKey
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
