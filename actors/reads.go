package actors

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/proto/kitpb"
)

// Reads of the store that do not go through the owning actor: the front end
// calls them without a hop. Each is safe for one of three reasons, given at
// each function:
//
//   - write-once: the records never change once written, so any committed
//     copy is current;
//   - locates only: it says which actor to ask, and that actor checks the
//     request itself;
//   - committed before answered: the owner commits every change before the
//     request that made it answers, so the read sees every answered change.
//
// The authenticator (auth.go) reads credential records on the same terms.
// Every other read asks the owner.

// LocateMessage returns the conversation that owns a message, from the tag
// its id carries (ids.NewMessage) and the tag index its conversation wrote
// when it was created. Only when two conversations share the tag does this
// read the message, to tell which of them holds it.
//
// Locates only: the conversation checks the id itself.
func LocateMessage(env *Env, id string) (conversationID string, err error) {
	tag, seq, ok := ids.ParseMessage(id)
	if !ok {
		return locateOlderMessage(env, id)
	}
	owners, err := taggedConversations(env, tag)
	if err != nil {
		return "", fmt.Errorf("locate message %s: %w", id, err)
	}
	if len(owners) == 1 {
		return owners[0], nil
	}
	for _, c := range owners {
		msg := &kitpb.Message{}
		found, err := env.loadIndex(messageKey(c, seq), msg)
		if err != nil {
			return "", fmt.Errorf("locate message %s: %w", id, err)
		}
		if found && msg.Id == id {
			return c, nil
		}
	}
	return locateOlderMessage(env, id)
}

// taggedConversations lists the conversations whose tag is tag: one,
// unless tags collide.
func taggedConversations(env *Env, tag uint32) ([]string, error) {
	prefix := messageTagPrefix(tag)
	var owners []string
	err := env.scanIndex(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		owners = append(owners, string(k[len(prefix):]))
		return true
	})
	return owners, err
}

// LocateFile returns the conversation that holds a file, from the tag its
// id carries (ids.NewTagged) and the conversations' tag index; a file
// uploaded before ids carried a tag is found through its locator record.
//
// Locates only: the conversation checks the id and the caller itself.
func LocateFile(env *Env, id string) (conversationID string, err error) {
	if tag, _, ok := ids.ParseMessage(id); ok {
		owners, err := taggedConversations(env, tag)
		if err != nil {
			return "", fmt.Errorf("locate file %s: %w", id, err)
		}
		for _, c := range owners {
			if found, err := env.hasIndex(fileKey(c, id)); err != nil || found {
				return c, err
			}
		}
	}
	kind, owner, err := Locate(env, id)
	if kiterr.CodeOf(err) == kiterr.NotFound || (err == nil && kind != KindConversation) {
		return "", kiterr.Absent("file")
	}
	return owner, err
}

// locateOlderMessage finds the conversation of a message written before
// ids carried their position.
func locateOlderMessage(env *Env, id string) (string, error) {
	loc, err := olderMessageLocator(env, id)
	if err != nil {
		return "", err
	}
	return loc.Owner, nil
}

// olderMessageLocator reads the locator record written with a message
// before ids carried their position; a missing one is kiterr.NotFound.
func olderMessageLocator(env *Env, id string) (*kitpb.Locator, error) {
	if !ids.Valid(id) {
		return nil, kiterr.Absent("message")
	}
	loc := &kitpb.Locator{}
	found, err := env.loadIndex(locatorKey(id), loc)
	if err != nil {
		return nil, fmt.Errorf("locate message %s: %w", id, err)
	}
	if !found || loc.Kind != KindConversation || loc.Seq == 0 {
		return nil, kiterr.Absent("message")
	}
	return loc, nil
}

// Locate returns which actor owns id (a message, user, session or
// developer token), from its locator record.
//
// Locates only: a locator is written once, with what it locates, and the
// owner it names checks the request.
func Locate(env *Env, id string) (kind, owner string, err error) {
	loc := &kitpb.Locator{}
	found, err := env.loadIndex(locatorKey(id), loc)
	if err != nil {
		return "", "", fmt.Errorf("locate %s: %w", id, err)
	}
	if !found {
		return "", "", kiterr.Absent("object")
	}
	return loc.Kind, loc.Owner, nil
}

// MemberConversations pages the ids of the conversations userID belongs
// to, in id (creation) order, after the id after.
//
// Committed before answered: each conversation commits its entries of
// this index before the change answers, and the front end then asks each
// conversation for what it shows.
func MemberConversations(env *Env, userID, after string, limit int) (ids []string, more bool, err error) {
	prefix := memberConversationsPrefix(userID)
	lower := keyAfter(memberConversationKey(userID, after))
	if after == "" {
		lower = prefix
	}
	err = env.scanIndex(lower, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		if len(ids) == limit {
			more = true
			return false
		}
		ids = append(ids, string(k[len(prefix):]))
		return true
	})
	return ids, more, err
}

// WebSession is a signed-in member, from the session cookie.
type WebSession struct {
	ID          string
	WorkspaceID string
	UserID      string
	ExpiresAt   int64
}

// Session returns the web session of a kit_session cookie value: one not
// ended, not expired, of a member still active (a session ends with its
// member, as the user tokens it authorized do).
//
// Committed before answered: ending a session or deactivating a member
// commits before it answers, and the reads catch up after such a change
// (credential, memberActive); sessions are not cached, as the app host is
// not on the hot path.
func (a *Authenticator) Session(secret []byte) (*WebSession, error) {
	if !ids.WellFormed(string(secret), ids.SessionCookie) {
		return nil, errInvalidToken
	}
	now := nanos(a.env.Clock.Now())
	cred, found, err := a.credential(sha256.Sum256(secret), now)
	if err != nil {
		return nil, err
	}
	if !found || cred.Kind != credSession || cred.RevokedAt != 0 || now >= cred.ExpiresAt {
		return nil, errInvalidToken
	}
	switch active, err := a.memberActive(cred.WorkspaceId, cred.UserId, now); {
	case err != nil:
		return nil, err
	case !active:
		return nil, errInvalidToken
	}
	return &WebSession{ID: cred.TokenId, WorkspaceID: cred.WorkspaceId, UserID: cred.UserId, ExpiresAt: cred.ExpiresAt}, nil
}

// GrantOwner returns the installation that owns an authorization code or a
// refresh token, so that kit.access can ask it. A secret of another kind, or
// none, is absent.
//
// Locates only: the installation checks the code or token itself.
func GrantOwner(env *Env, secret string) (installationID string, err error) {
	if !ids.WellFormed(secret, ids.AuthCode) && !ids.WellFormed(secret, ids.RefreshToken) {
		return "", kiterr.Absent("grant")
	}
	cred, err := credentialOf(env, secret, "grant")
	if err != nil {
		return "", err
	}
	if cred.Kind != credCode && cred.Kind != credRefresh {
		return "", kiterr.Absent("grant")
	}
	return cred.InstallationId, nil
}

// credentialOf reads the credential record of secret; a missing one is
// kiterr.Absent(what).
func credentialOf(env *Env, secret, what string) (*kitpb.Credential, error) {
	hash := ids.Hash(secret)
	cred := &kitpb.Credential{}
	found, err := env.loadIndex(credentialKey(hash[:]), cred)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	if !found {
		return nil, kiterr.Absent(what)
	}
	return cred, nil
}

// SignInChoiceOwner returns the workspace that holds a pending sign-in
// choice, so that the app host can ask it to spend the choice.
//
// Locates only: the workspace checks and spends the choice itself.
func SignInChoiceOwner(env *Env, secret string) (workspaceID string, err error) {
	if !ids.WellFormed(secret, ids.SignInChoice) {
		return "", kiterr.Absent("sign-in choice")
	}
	cred, err := credentialOf(env, secret, "sign-in choice")
	if err != nil {
		return "", err
	}
	if cred.Kind != credSignInChoice {
		return "", kiterr.Absent("sign-in choice")
	}
	return cred.WorkspaceId, nil
}

// SignInMember is a member who may sign in with an email: the index
// entry of emailUserKey.
type SignInMember struct{ WorkspaceID, UserID string }

// SignInMembers returns at most limit of the members who may sign in
// with email, oldest first, across workspaces.
//
// Locates only: each workspace written here is then asked for its member
// by email, and answers only for an active one.
func SignInMembers(env *Env, email string, limit int) ([]SignInMember, error) {
	prefix := emailUsersPrefix(normalEmail(email))
	var out []SignInMember
	err := env.scanIndex(prefix, persistence.PrefixEnd(prefix), false, func(k, v []byte) bool {
		out = append(out, SignInMember{WorkspaceID: string(v), UserID: string(k[len(prefix):])})
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("find members by email: %w", err)
	}
	return out, nil
}

// KitBySlug returns the id of the Kit a slug belongs to.
//
// Write-once: the slug actor writes a claim once and never changes it.
func KitBySlug(env *Env, slug string) (string, error) {
	owner := &kitpb.ClaimSlug{}
	found, err := env.loadIndex(slugKey(slug), owner)
	if err != nil {
		return "", fmt.Errorf("load slug: %w", err)
	}
	if !found {
		return "", kiterr.Absent("kit")
	}
	return owner.KitId, nil
}

// WorkspaceKits returns the ids of the Kits the workspace owns, in creation
// order.
//
// Committed before answered: each kit actor commits its entry of this
// index before the upload that created the Kit answers, and the front end
// then asks each Kit.
func WorkspaceKits(env *Env, workspaceID string) ([]string, error) {
	prefix := workspaceKitsPrefix(workspaceID)
	var out []string
	err := env.scanIndex(prefix, persistence.PrefixEnd(prefix), false, func(k, _ []byte) bool {
		out = append(out, string(k[len(prefix):]))
		return true
	})
	return out, err
}

// InstalledHere reports whether the workspace has an active installation of
// the Kit.
//
// Committed before answered: it reads the workspace's record of which
// installation the Kit has here and that installation's record, both
// committed before the calls that change them answer.
func InstalledHere(env *Env, workspaceID, kitID string) (bool, error) {
	id, err := InstallationHere(env, workspaceID, kitID)
	return id != "", err
}

// InstallationHere is the id of the workspace's active installation of the
// Kit; "" when it has none. Committed before answered, as InstalledHere;
// the installation's record changes (an uninstall), so this node's replica
// of it is first caught up with its leader: a follower that had not yet
// applied an uninstall answered through another node said "installed"
// (TestClusterUninstallReachesTheDeveloperAPIAtOnce). The index entry is
// written once, and a miss of it catches up by itself.
func InstallationHere(env *Env, workspaceID, kitID string) (string, error) {
	instID, err := env.getIndex(installedKitKey(workspaceID, kitID))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	key := installationKey(string(instID))
	if err := env.catchUpFor(key); err != nil {
		return "", fmt.Errorf("catch up installation %s: %w", instID, err)
	}
	in := &kitpb.Installation{}
	found, err := env.loadIndex(key, in)
	if err != nil || !found || in.Uninstalled {
		return "", err
	}
	return in.Id, nil
}

// KitByInstallLink returns the id of the Kit whose install link has hash
// (the index the kit actor writes with the link).
//
// Locates only: the Kit must still be asked, as only it knows whether the
// link works.
func KitByInstallLink(env *Env, hash []byte) (string, error) {
	v, err := env.getIndex(installLinkIndexKey(hash))
	if errors.Is(err, persistence.ErrNotFound) {
		return "", errLinkAbsent
	}
	if err != nil {
		return "", fmt.Errorf("load install link index: %w", err)
	}
	return string(v), nil
}

// memberSignedIn reports whether the web session that authorized cred is
// still on and its member still active, and until when the session lasts.
// With fresh, it first catches up this node's replica of the workspace's
// partition, if it holds one: a follower may not have applied a session's
// end or a member's deactivation that its leader has answered.
//
// Committed before answered: sessions and users are written by the
// workspace actor, which commits before it answers. Reading them here
// rather than asking the workspace keeps installation → workspace calls,
// and so a cycle, out.
func memberSignedIn(env *Env, cred *kitpb.Credential, now int64, fresh bool) (sessionEnds int64, ok bool, err error) {
	if fresh {
		if err := env.catchUpFor(userKey(cred.WorkspaceId, cred.UserId)); err != nil {
			return 0, false, fmt.Errorf("catch up member %s: %w", cred.UserId, err)
		}
	}
	s := &kitpb.Session{}
	found, err := env.loadIndex(sessionKey(cred.WorkspaceId, cred.SessionId), s)
	if err != nil || !found || s.EndedAt != 0 || now >= s.ExpiresAt || s.UserId != cred.UserId {
		return 0, false, err
	}
	u := &kitpb.User{}
	found, err = env.loadIndex(userKey(cred.WorkspaceId, cred.UserId), u)
	if err != nil || !found || !u.Active {
		return 0, false, err
	}
	return s.ExpiresAt, true, nil
}

// ReadDevLog returns up to limit entries of the Kit's log, newest first,
// strictly older than the entry id before ("" = from the newest) and not
// expired (logExpired). keep filters entries (nil keeps all). more
// reports that older entries remain.
//
// Write-once: entries never change, and no actor owns the log (devlog.go).
// Entries live in their writers' partitions, so this merges the newest
// limit+1 of every partition.
func ReadDevLog(env *Env, kitID, before string, limit int, keep func(*kitpb.DevLogEntry) bool) (entries []*kitpb.DevLogEntry, more bool, err error) {
	now := env.Clock.Now()
	readers, err := env.everyPartition()
	if err != nil {
		return nil, false, err
	}
	for p, r := range readers {
		got, err := readDevLogOf(r, partition.ID(p), kitID, before, now, limit+1, keep)
		if err != nil {
			return nil, false, err
		}
		entries = append(entries, got...)
	}
	slices.SortFunc(entries, func(a, b *kitpb.DevLogEntry) int { return strings.Compare(b.Id, a.Id) })
	if len(entries) > limit {
		entries, more = entries[:limit], true
	}
	return entries, more, nil
}

// readDevLogOf reads up to limit entries of the Kit that actors of
// partition p wrote, through r, on ReadDevLog's terms.
func readDevLogOf(r PartitionReader, p partition.ID, kitID, before string, now time.Time, limit int, keep func(*kitpb.DevLogEntry) bool) (entries []*kitpb.DevLogEntry, err error) {
	prefix := devLogPrefix(p, kitID)
	lower, upper := devLogCutoff(p, kitID, now), persistence.PrefixEnd(prefix)
	if before != "" {
		upper = devLogKey(p, kitID, before)
	}
	var decodeErr error
	err = r.Scan(lower, upper, true, func(k, v []byte) bool {
		e := &kitpb.DevLogEntry{}
		if decodeErr = proto.Unmarshal(v, e); decodeErr != nil {
			return false
		}
		if e.Id == "" { // stored since 2026-11-22: the id is only in the key
			e.Id = string(k[len(prefix):])
		}
		if logExpired(e, now) {
			// The cutoff is a millisecond prefix of the ids: entries of
			// its millisecond may have expired within it.
			return true
		}
		if keep != nil && !keep(e) {
			return true
		}
		entries = append(entries, e)
		return len(entries) < limit
	})
	if err == nil {
		err = decodeErr
	}
	return entries, err
}

// FileContent reads a stored file's bytes chunk by chunk, straight from
// storage and never through the actor: chunks never change once written,
// so once the conversation has answered the file's metadata to a caller
// who may see it, the front end streams the content without holding the
// whole file in memory. It is an io.Reader and an io.WriterTo; the latter
// writes each chunk from the store's own buffers.
type FileContent struct {
	store      PartitionReader // the conversation's partition
	conv, file string
	prefix     []byte // fileChunksPrefix
	size       int64
	chunks     uint32

	next uint32 // the next chunk Read loads
	buf  []byte // the rest of the chunk Read is serving
	done int64  // bytes served
}

// OpenFileContent returns a reader of f's bytes. f must come from the
// conversation actor's answer (GetFile), which checked visibility.
func OpenFileContent(env *Env, f *kitpb.File) *FileContent {
	return &FileContent{
		store: env.partitionOf(fileChunksPrefix(f.ConversationId, f.Id)), conv: f.ConversationId, file: f.Id, prefix: fileChunksPrefix(f.ConversationId, f.Id),
		size: f.SizeBytes, chunks: f.Chunks,
	}
}

// Size is the number of bytes of the file.
func (c *FileContent) Size() int64 { return c.size }

// Read serves the file in order, loading one chunk at a time.
func (c *FileContent) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.next == c.chunks {
			if c.done != c.size {
				return 0, fmt.Errorf("file content: %d of %d bytes stored", c.done, c.size)
			}
			return 0, io.EOF
		}
		v, err := c.store.Get(fileChunkKey(c.conv, c.file, uint64(c.next)))
		if err != nil {
			return 0, fmt.Errorf("file content chunk %d: %w", c.next, err)
		}
		c.next++
		c.buf = v
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	c.done += int64(n)
	return n, nil
}

// WriteTo writes the rest of the file to w in one ordered scan of its
// chunks. It is only called before any Read.
func (c *FileContent) WriteTo(w io.Writer) (int64, error) {
	if c.next != 0 || c.done != 0 {
		return io.Copy(w, struct{ io.Reader }{c})
	}
	var n int64
	var werr error
	want := uint32(0)
	err := c.store.Scan(c.prefix, persistence.PrefixEnd(c.prefix), false, func(k, v []byte) bool {
		if len(k) != len(c.prefix)+positionLen || decodeSeq(k[len(c.prefix):]) != uint64(want) {
			werr = fmt.Errorf("file content: chunk %d missing", want)
			return false
		}
		want++
		m, err := w.Write(v)
		n += int64(m)
		if err != nil {
			werr = err
			return false
		}
		return true
	})
	c.next, c.done = c.chunks, n
	if err == nil {
		err = werr
	}
	if err == nil && (n != c.size || want != c.chunks) {
		err = fmt.Errorf("file content: %d of %d bytes stored", n, c.size)
	}
	return n, err
}

// WebhookTargets finds the webhook actor that answers a post to a webhook
// id: its own, or AbsentWebhook's when no webhook has that id. A made-up id
// would otherwise activate an actor that reads nothing, answers and stops,
// about 100 µs more than a live webhook's 404 for a wrong secret (issue
// 17); through the stand-in, which stays active as a live webhook does,
// every 404 of the hooks host takes the same path: one request to an
// active webhook actor, the same comparisons.
//
// The ids found to exist are remembered in a fixed-size, direct-mapped
// table (a lookup is a hash and an atomic load: no lock, no allocation),
// so that a live webhook's posts skip the storage read, which measured 15%
// of a post's CPU. A made-up id pays that read, about a microsecond against
// the tens of microseconds of a request; an id pushed out by another is
// read again.
//
// Reads only whether the record exists: it is written once, when the
// webhook is created, and deleted only by the purge of its uninstalled
// installation (installation_purge.go; a revoked webhook keeps it). A
// remembered id of a purged webhook reaches its own actor, which finds
// no record and answers the same 404; the webhook actor checks the post
// itself.
type WebhookTargets struct {
	env   *Env
	seed  maphash.Seed
	known []atomic.Pointer[string]
}

// NewWebhookTargets remembers up to slots webhook ids (rounded up to a
// power of two; 8 bytes a slot, and the id once remembered).
func NewWebhookTargets(env *Env, slots int) *WebhookTargets {
	n := 1
	for n < slots {
		n <<= 1
	}
	return &WebhookTargets{env: env, seed: maphash.MakeSeed(), known: make([]atomic.Pointer[string], n)}
}

// Of is the identity of the webhook actor that answers a post to webhookID.
func (w *WebhookTargets) Of(webhookID string) (string, error) {
	slot := &w.known[maphash.String(w.seed, webhookID)&uint64(len(w.known)-1)]
	if p := slot.Load(); p != nil && *p == webhookID {
		return webhookID, nil
	}
	found, err := w.env.hasIndex(webhookKey(webhookID))
	if err != nil {
		return "", fmt.Errorf("locate webhook %s: %w", webhookID, err)
	}
	if !found {
		return AbsentWebhook, nil
	}
	id := strings.Clone(webhookID) // not a view of the request's path
	slot.Store(&id)
	return webhookID, nil
}

// WorkspaceInstallations returns the ids of the workspace's installations,
// one per Kit it ever installed (uninstalled ones too: the caller asks each
// installation for its state).
//
// Committed before answered: the workspace commits its entry of this index
// before the install that wrote it answers.
func WorkspaceInstallations(env *Env, workspaceID string) ([]string, error) {
	prefix := installedKitsPrefix(workspaceID)
	var out []string
	err := env.scanIndex(prefix, persistence.PrefixEnd(prefix), false, func(_, v []byte) bool {
		out = append(out, string(v))
		return true
	})
	return out, err
}
