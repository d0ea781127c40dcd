package actors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// Storage keys. This file is the only one that knows the layout: every key
// the package reads or writes comes from a constructor below, every range it
// scans from a prefix constructor, and keyShapes says what each key looks
// like (a unit test parses the package and refuses a key built anywhere
// else). Each actor writes only under its own prefix (and the locator,
// credential and email index records of the things it owns), so the actor
// is the only writer of every key it reads back.
//
// Every key but the node's own (layoutKey) starts with its partition,
// p/<2 bytes>/, so that a partition's records are one key range
// (internal/partition; docs/cluster.md). The partition is its owner's: the
// identity the key is named after (the workspace of ws/..., the
// conversation of conv/...), and for an index record the identity, hash or
// tag it is looked up by (cred/<hash>, uc/<user>/..., mtag/<tag>/...). That
// owner is always the key's first field after its kind, which is what lets
// Upgrade move keys written before partitions (partitionOfUnpartitioned).
//
// Parts of a key are joined with '/'. Ids never contain one; the binary
// parts (positions, hashes) have a fixed length instead, so a decoder takes
// them by length.

// keyShapes is the layout, one row per constructor, after the partition
// prefix: literal bytes, and fields in braces. {id} is a non-empty part
// without '/'; {pos} a position, 8 bytes big-endian (so a scan is in
// order); {uuid} an id's 16 bytes (uuidLen); {hash} a raw SHA-256, 32
// bytes; {hex64} the same in hex; {hex8} a message-id tag; {version} a
// sortable version, 0001.00002.000003; {rest} everything to the end. The
// first field names the partition.
var keyShapes = []struct{ constructor, shape string }{
	{"workspaceKey", "ws/{id}"},                          // Workspace
	{"userKey", "ws/{id}/u/{id}"},                        // User (ids are UUIDv7: the scan is creation order)
	{"installedKitKey", "ws/{id}/k/{id}"},                // installation id of the Kit in this workspace
	{"installationEventsKey", "ws/{id}/ie/{id}"},         // InstallationEvents of an installation that gets user.* events (events.go)
	{"sessionKey", "ws/{id}/s/{id}"},                     // Session
	{"sessionSecretKey", "ws/{id}/sh/{id}"},              // SHA-256 of a session's cookie secret
	{"developerTokenKey", "ws/{id}/d/{id}"},              // SHA-256 of a developer token, by token id
	{"signInChoiceKey", "ws/{id}/sc/{pos}{hash}"},        // a pending sign-in choice the workspace holds (empty value): its ExpiresAt (unix nanoseconds), then the SHA-256 of its secret; deleted with its credential once taken or expired (workspace_signin_sweep.go); a choice of a build before it has no entry and stays
	{"conversationKey", "conv/{id}"},                     // Conversation
	{"memberKey", "conv/{id}/m/{id}"},                    // Member
	{"botMemberKey", "conv/{id}/b/{id}"},                 // BotMember
	{"messageKey", "conv/{id}/s/{pos}"},                  // Message, in conversation order, stored without its conversation id
	{"threadReplyKey", "conv/{id}/t/{pos}{pos}"},         // thread index, parent then reply position (empty value)
	{"idempotencyKey", "conv/{id}/p/{rest}"},             // Idempotency, by <author kind>:<owner>\x00<Idempotency-Key> (owner: a bot's id, or <user id>/<installation id>; <user id> alone: an older build's, or the copy kept for one); deleted once expired through idempotencyExpiryKey
	{"idempotencyExpiryKey", "conv/{id}/pe/{pos}{rest}"}, // expiry index of the Idempotency records, one entry a keyed post: their ExpiresAt (unix nanoseconds), then the rest of the record's key after p/; the value is the rest of the key of the member-wide copy written with it, or empty. Swept by the conversation (conversation_idempotency.go); a record of a build before it has no entry and stays
	{"fileKey", "conv/{id}/f/{id}"},                      // File (metadata; its id carries the conversation's tag, as a message id does)
	{"fileChunkKey", "conv/{id}/f/{id}/{pos}"},           // chunk n of a file's bytes (at most FileChunkSize)
	{"memberConversationKey", "uc/{id}/{id}"},            // a member's conversation (written by that conversation; empty value)
	{"messageTagKey", "mtag/{hex8}/{id}"},                // a conversation's message-id tag (empty value): finds the conversation of a message or file id (ids.NewMessage)
	{"installationKey", "inst/{id}"},                     // Installation
	{"webhookRefKey", "inst/{id}/w/{id}"},                // WebhookRef (the installation's webhooks)
	{"grantCredentialKey", "inst/{id}/g/{id}/{hash}"},    // a credential of one authorization (empty value; docs/credentials.md); deleted with its credential once that can no longer work (installation_grants_sweep.go)
	{"botTokenKey", "inst/{id}/t/{id}"},                  // SHA-256 of a bot token, by token id (UUIDv7: the scan is creation order); deleted with its credential once that can no longer work (installation_bottokens_sweep.go)
	{"userGrantKey", "inst/{id}/ug/{id}/{id}"},           // UserGrant, by member and grant id: the member's authorizations
	{"runKey", "inst/{id}/r/{id}"},                       // Run of a tool call (installation_runs.go); deleted RunRetention after its end (installation_runs_sweep.go)
	{"openRunKey", "inst/{id}/ro/{id}"},                  // a run still queued or running (empty value): what an activation fails as interrupted
	{"responseURLKey", "inst/{id}/rsp/{hash}"},           // ResponseURL, by the SHA-256 of its token (installation_actions.go)
	{"purgeKey", "purge/{id}"},                           // an uninstalled installation whose records are still being deleted (empty value): written with the uninstall, deleted by the purge's last batch; the start-up wake finds it (installation_purge.go)
	{"webhookKey", "hook/{id}"},                          // Webhook (written by its webhook actor)
	{"kitKey", "kit/{id}"},                               // Kit
	{"versionKey", "kit/{id}/v/{version}"},               // KitVersion
	{"clientSecretKey", "kit/{id}/cs"},                   // SecretState of the client secret
	{"signingSecretKey", "kit/{id}/ss"},                  // SecretState of the signing secret
	{"domainKey", "kit/{id}/d/{id}"},                     // KitDomain
	{"installLinkKey", "kit/{id}/il"},                    // InstallLink: hash and creation time of the current install link
	{"installLinkIndexKey", "illink/{hex64}"},            // kit id of an install link (written with installLinkKey by the kit actor)
	{"workspaceKitKey", "kits/{id}/{id}"},                // a Kit owned by a workspace (written by the kit actor; empty value)
	{"slugKey", "slug/{id}"},                             // ClaimSlug: which Kit a slug belongs to
	{"credentialKey", "cred/{hash}"},                     // Credential (bot, user, refresh, code, developer, session, signin_choice)
	{"emailUserKey", "email/{hex64}/{id}"},               // workspace id of an active user who can sign in with this email (SHA-256 of the lower-case email; written with the user by its workspace)
	{"locatorKey", "loc/{id}"},                           // Locator: which actor owns an id (messages and files have none, but those written before their ids carried a tag)
	{"devLogKey", "devlog/{id}/{id}"},                    // DevLogEntry, stored without its id; written once by the actor that decided what it reports, in that actor's partition (writerPartitioned), expired by range deletion (devlog.go)
	{"outboxKey", "ob/{uuid}{uuid}{pos}"},                // Event for an installation from an emitting actor, by that actor's position, in its partition (writerPartitioned); written by the emitter, referred to by its queue record until its delivery ends, then deleted by the installation's delivery actor (events.go, delivery.go)
	{"eventSequenceKey", "dlv/{id}/seq"},                 // the last sequence an installation's delivery actor gave out, 8 bytes big-endian
	{"queuedEventKey", "dlv/{id}/q/{pos}"},               // the Event itself with its delivery state after a failed attempt, a redelivery or a test event, until delivered or dead; before taken records, also a reference to the outbox entry with its sequence (delivery.go)
	{"takenEventsKey", "dlv/{id}/t/{pos}"},               // what one commit of the sequencer took: the outbox entries of the sequences from {pos} on, until none of them is queued as a reference (delivery_taken.go)
	{"deadEventKey", "dlv/{id}/x/{pos}"},                 // Event whose delivery failed for 24 hours (dead letter), by sequence
	{"deliveredEventKey", "dlv/{id}/d/{pos}"},            // Event delivered, by sequence; the most recent KeepDelivered are kept for the list and redelivery
	{"deliveryEndpointKey", "dlv/{id}/ep"},               // DeliveryEndpoint: the installation's endpoint failing or paused (delivery_endpoint.go)
}

// writerPartitioned are the kinds whose keys live in the partition of the
// actor that writes them rather than of their first field, so that an
// entry commits in its writer's batch, with the change it reports: a
// reader of such a kind scans every partition.
var writerPartitioned = map[string]bool{"devLogKey": true, "outboxKey": true}

// nodeKeyShapes are the keys of the node itself, in no partition.
var nodeKeyShapes = []struct{ constructor, shape string }{
	{"layoutKey", "meta/layout"}, // the data layout the directory is at (upgrade.go), 8 bytes big-endian
}

// key joins parts into a key of partition p in one allocation.
// Constructors call it; nothing else may.
func key(p partition.ID, parts ...string) []byte { return keyWithRoom(p, 0, parts...) }

// keyWithRoom is key with capacity for room more bytes, which a
// constructor appends (a position, a hash) without allocating again.
func keyWithRoom(p partition.ID, room int, parts ...string) []byte {
	n := partition.KeyPrefixLen + room
	for _, part := range parts {
		n += len(part) + 1
	}
	b := partition.AppendKeyPrefix(make([]byte, 0, n), p)
	for i, part := range parts {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, part...)
	}
	return b
}

// nodeKey joins parts into a key of the node itself, in no partition.
func nodeKey(parts ...string) []byte { return []byte(strings.Join(parts, "/")) }

// positionLen is the length of a position (a message's, a chunk's).
const positionLen = 8

// decodeSeq reads the position a key ends with, from the bytes after its
// prefix; 0 when they are too short.
func decodeSeq(b []byte) uint64 {
	if len(b) < positionLen {
		return 0
	}
	var v uint64
	for _, c := range b[:positionLen] {
		v = v<<8 | uint64(c)
	}
	return v
}

// keyAfter is the first key after k, for a scan that starts past a cursor.
// It may reuse k's memory.
func keyAfter(k []byte) []byte { return append(k, 0) }

// Workspace records.

func workspaceKey(ws string) []byte { return key(partition.Of(ws), "ws", ws) }

func userKey(ws, user string) []byte { return key(partition.Of(ws), "ws", ws, "u", user) }

func usersPrefix(ws string) []byte { return userKey(ws, "") }

// unpartitionedWorkspacesPrefix covers every workspace's records as layouts
// before 2 stored them, without a partition; only an upgrade step of those
// layouts scans it.
func unpartitionedWorkspacesPrefix() []byte { return []byte("ws/") }

func installedKitKey(ws, kit string) []byte { return key(partition.Of(ws), "ws", ws, "k", kit) }

func installedKitsPrefix(ws string) []byte { return installedKitKey(ws, "") }

func installationEventsKey(ws, inst string) []byte {
	return key(partition.Of(ws), "ws", ws, "ie", inst)
}

func installationEventsPrefix(ws string) []byte { return installationEventsKey(ws, "") }

func sessionKey(ws, session string) []byte { return key(partition.Of(ws), "ws", ws, "s", session) }

// sessionsPrefix covers the workspace's sessions, in order of session id.
func sessionsPrefix(ws string) []byte { return sessionKey(ws, "") }

func sessionSecretKey(ws, session string) []byte {
	return key(partition.Of(ws), "ws", ws, "sh", session)
}

func signInChoiceKey(ws string, expiresAt int64, hash []byte) []byte {
	k := keyWithRoom(partition.Of(ws), positionLen+len(hash), "ws", ws, "sc", "")
	return append(persistence.AppendUint64(k, uint64(expiresAt)), hash...)
}

// signInChoicesPrefix covers the choices ws holds, in order of expiry.
func signInChoicesPrefix(ws string) []byte { return key(partition.Of(ws), "ws", ws, "sc", "") }

// signInChoicesBefore is the end of the entries of the choices ws holds
// that expire before at.
func signInChoicesBefore(ws string, at int64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(ws), positionLen, "ws", ws, "sc", ""), uint64(at))
}

func developerTokenKey(ws, tokenID string) []byte {
	return key(partition.Of(ws), "ws", ws, "d", tokenID)
}

// Conversation records.

func conversationKey(conv string) []byte { return key(partition.Of(conv), "conv", conv) }

func memberKey(conv, user string) []byte { return key(partition.Of(conv), "conv", conv, "m", user) }

func membersPrefix(conv string) []byte { return memberKey(conv, "") }

func botMemberKey(conv, bot string) []byte { return key(partition.Of(conv), "conv", conv, "b", bot) }

func botMembersPrefix(conv string) []byte { return botMemberKey(conv, "") }

// messageKey is on every post's path: one allocation.
func messageKey(conv string, seq uint64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(conv), positionLen, "conv", conv, "s", ""), seq)
}

// messagesPrefix is the prefix of a conversation's messages.
func messagesPrefix(conv string) []byte { return key(partition.Of(conv), "conv", conv, "s", "") }

func threadReplyKey(conv string, parentSeq, seq uint64) []byte {
	k := keyWithRoom(partition.Of(conv), 2*positionLen, "conv", conv, "t", "")
	return persistence.AppendUint64(persistence.AppendUint64(k, parentSeq), seq)
}

// threadRepliesPrefix is the prefix of the replies to the message at
// parentSeq.
func threadRepliesPrefix(conv string, parentSeq uint64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(conv), positionLen, "conv", conv, "t", ""), parentSeq)
}

// idempotencyKey is the record of one owner's Idempotency-Key in the
// conversation (idempotencyOwner).
func idempotencyKey(conv, authorKind, authorID, idemKey string) []byte {
	k := keyWithRoom(partition.Of(conv), len(authorKind)+len(authorID)+len(idemKey)+2, "conv", conv, "p", "")
	k = append(append(k, authorKind...), ':')
	k = append(append(k, authorID...), 0)
	return append(k, idemKey...)
}

// idempotencyRecordsPrefix covers conv's Idempotency records.
func idempotencyRecordsPrefix(conv string) []byte {
	return key(partition.Of(conv), "conv", conv, "p", "")
}

// idempotencyRest is what follows the kind (p/) in rec, an idempotencyKey
// of conv: the part an expiry index entry names the record by.
func idempotencyRest(conv string, rec []byte) []byte {
	return rec[partition.KeyPrefixLen+len("conv/")+len(conv)+len("/p/"):]
}

// idempotencyKeyOfRest is the idempotencyKey of conv that rest
// (idempotencyRest) names.
func idempotencyKeyOfRest(conv string, rest []byte) []byte {
	return append(keyWithRoom(partition.Of(conv), len(rest), "conv", conv, "p", ""), rest...)
}

// idempotencyExpiryKey is the expiry index entry of rec, an idempotencyKey
// of conv whose record expires at expiresAt (unix nanoseconds): the
// entries are in order of expiry, so a sweep reads those due from the
// start of idempotencyExpiriesPrefix.
func idempotencyExpiryKey(conv string, expiresAt int64, rec []byte) []byte {
	rest := idempotencyRest(conv, rec)
	k := keyWithRoom(partition.Of(conv), positionLen+len(rest), "conv", conv, "pe", "")
	return append(persistence.AppendUint64(k, uint64(expiresAt)), rest...)
}

// idempotencyExpiriesPrefix covers the expiry index of conv's records.
func idempotencyExpiriesPrefix(conv string) []byte {
	return key(partition.Of(conv), "conv", conv, "pe", "")
}

// idempotencyExpiriesBefore is the end of the entries of conv's expiry
// index whose records expire before at.
func idempotencyExpiriesBefore(conv string, at int64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(conv), positionLen, "conv", conv, "pe", ""), uint64(at))
}

// idempotencyExpiryRecords is the keys of the records that an entry of
// conv's expiry index (key k, value v) names: the record, and the
// member-wide copy written with it when v names one.
func idempotencyExpiryRecords(conv string, k, v []byte) [][]byte {
	recs := [][]byte{idempotencyKeyOfRest(conv, k[len(idempotencyExpiriesPrefix(conv))+positionLen:])}
	if len(v) > 0 {
		recs = append(recs, idempotencyKeyOfRest(conv, v))
	}
	return recs
}

func fileKey(conv, file string) []byte { return key(partition.Of(conv), "conv", conv, "f", file) }

// filesPrefix covers the metadata and chunks of every file of the
// conversation.
func filesPrefix(conv string) []byte { return fileKey(conv, "") }

func fileChunkKey(conv, file string, n uint64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(conv), positionLen, "conv", conv, "f", file, ""), n)
}

// fileChunksPrefix is the prefix of a file's chunks; the file's metadata
// key is not under it.
func fileChunksPrefix(conv, file string) []byte {
	return key(partition.Of(conv), "conv", conv, "f", file, "")
}

// memberConversationKey indexes a member's conversations; each
// conversation writes only its own entries.
func memberConversationKey(user, conv string) []byte {
	return key(partition.Of(user), "uc", user, conv)
}

func memberConversationsPrefix(user string) []byte { return memberConversationKey(user, "") }

func messageTagKey(tag uint32, conv string) []byte {
	return key(partition.OfTag(tag), "mtag", fmt.Sprintf("%08x", tag), conv)
}

// messageTagPrefix is the prefix of the conversations whose message ids
// carry tag.
func messageTagPrefix(tag uint32) []byte { return messageTagKey(tag, "") }

// Installation and webhook records.

func installationKey(inst string) []byte { return key(partition.Of(inst), "inst", inst) }

func webhookRefKey(inst, webhook string) []byte {
	return key(partition.Of(inst), "inst", inst, "w", webhook)
}

func webhookRefsPrefix(inst string) []byte { return webhookRefKey(inst, "") }

// installationRecordsPrefix covers every record of inst under its own
// key (its webhooks, grants, bot tokens, runs, responseUrls), not the
// installation record itself.
func installationRecordsPrefix(inst string) []byte { return key(partition.Of(inst), "inst", inst, "") }

func purgeKey(inst string) []byte { return key(partition.Of(inst), "purge", inst) }

// purgesPrefix covers the purge markers of the installations of
// partition p.
func purgesPrefix(p partition.ID) []byte { return key(p, "purge", "") }

// purgeInstallation is the installation of a purge marker's key.
func purgeInstallation(k []byte) string { return string(k[len(purgesPrefix(0)):]) }

func responseURLKey(inst string, hash []byte) []byte {
	return append(keyWithRoom(partition.Of(inst), len(hash), "inst", inst, "rsp", ""), hash...)
}

func responseURLsPrefix(inst string) []byte { return responseURLKey(inst, nil) }

func grantCredentialKey(inst, grant string, hash []byte) []byte {
	return append(keyWithRoom(partition.Of(inst), len(hash), "inst", inst, "g", grant, ""), hash...)
}

// grantPrefix is the prefix of the credentials of one authorization: the
// hash of each follows it.
func grantPrefix(inst, grant string) []byte {
	return key(partition.Of(inst), "inst", inst, "g", grant, "")
}

// grantsPrefix covers the credentials of every authorization of inst, in
// order of grant id.
func grantsPrefix(inst string) []byte { return key(partition.Of(inst), "inst", inst, "g", "") }

func botTokenKey(inst, tokenID string) []byte {
	return key(partition.Of(inst), "inst", inst, "t", tokenID)
}

func botTokensPrefix(inst string) []byte { return botTokenKey(inst, "") }

func userGrantKey(inst, user, grant string) []byte {
	return key(partition.Of(inst), "inst", inst, "ug", user, grant)
}

func userGrantsPrefix(inst, user string) []byte { return userGrantKey(inst, user, "") }

func runKey(inst, run string) []byte { return key(partition.Of(inst), "inst", inst, "r", run) }

// runsPrefix covers the runs of inst, in order of run id: of creation.
func runsPrefix(inst string) []byte { return runKey(inst, "") }

func openRunKey(inst, run string) []byte { return key(partition.Of(inst), "inst", inst, "ro", run) }

func openRunsPrefix(inst string) []byte { return openRunKey(inst, "") }

func webhookKey(webhook string) []byte { return key(partition.Of(webhook), "hook", webhook) }

// Kit and slug records.

func kitKey(kit string) []byte { return key(partition.Of(kit), "kit", kit) }

// versionKey sorts a Kit's versions by number.
func versionKey(kit string, v manifest.Version) []byte {
	return key(partition.Of(kit), "kit", kit, "v", fmt.Sprintf("%04d.%05d.%06d", v.Major, v.Minor, v.Patch))
}

func versionsPrefix(kit string) []byte { return key(partition.Of(kit), "kit", kit, "v", "") }

func clientSecretKey(kit string) []byte { return key(partition.Of(kit), "kit", kit, "cs") }

func signingSecretKey(kit string) []byte { return key(partition.Of(kit), "kit", kit, "ss") }

func domainKey(kit, domain string) []byte { return key(partition.Of(kit), "kit", kit, "d", domain) }

func domainsPrefix(kit string) []byte { return domainKey(kit, "") }

func installLinkKey(kit string) []byte { return key(partition.Of(kit), "kit", kit, "il") }

func installLinkIndexKey(hash []byte) []byte {
	return key(partition.OfHash(hash), "illink", hex.EncodeToString(hash))
}

func workspaceKitKey(ws, kit string) []byte { return key(partition.Of(ws), "kits", ws, kit) }

// WorkspaceKitKey and MemberConversationKey are entries of the workspace's
// Kits and of a member's conversations, for tests of other packages that
// leave one leading nowhere, as a kill in the middle of a write can
// (docs/cluster.md, "Global indexes").
func WorkspaceKitKey(ws, kit string) []byte          { return workspaceKitKey(ws, kit) }
func MemberConversationKey(user, conv string) []byte { return memberConversationKey(user, conv) }

func workspaceKitsPrefix(ws string) []byte { return workspaceKitKey(ws, "") }

func slugKey(slug string) []byte { return key(partition.Of(slug), "slug", slug) }

// Records of no single owner's range.

// layoutKey records the data layout a directory is at; it is written only
// by Upgrade, before any actor runs.
func layoutKey() []byte { return nodeKey("meta", "layout") }

func credentialKey(hash []byte) []byte {
	return append(keyWithRoom(partition.OfHash(hash), len(hash), "cred", ""), hash...)
}

// CredentialKey is where the credential of hash is stored, for tests of
// other packages that store a credential of chosen scopes by hand.
func CredentialKey(hash []byte) []byte { return credentialKey(hash) }

func locatorKey(id string) []byte { return key(partition.Of(id), "loc", id) }

// emailUserKey indexes the users who may sign in with an email, across
// workspaces. The email is hashed: an email may hold '/' and the key need
// not show it. Callers pass it normalized (normalEmail).
func emailUserKey(email, user string) []byte {
	sum := sha256.Sum256([]byte(email))
	return key(partition.OfHash(sum[:]), "email", hex.EncodeToString(sum[:]), user)
}

func emailUsersPrefix(email string) []byte { return emailUserKey(email, "") }

// devLogKey is an entry of a Kit's developer log written by an actor of
// partition writer; since entry ids are time-ordered, devLogKey with an
// id's prefix is a time bound of a scan.
func devLogKey(writer partition.ID, kit, entryID string) []byte {
	return key(writer, "devlog", kit, entryID)
}

// devLogPrefix is the prefix of the Kit's entries that actors of partition
// writer wrote.
func devLogPrefix(writer partition.ID, kit string) []byte { return devLogKey(writer, kit, "") }

// Events and their delivery (events.go, delivery.go).

// outboxKey is an event for installation inst written by the actor source
// (a conversation) at its position pos. It lives in the source's
// partition (writerPartitioned), so that it commits in the batch of the
// write that caused it. The installation comes first so that its delivery
// actor finds its outbox with one scan a partition; within a source,
// positions keep the order in which the source wrote. Both ids are their
// 16 bytes, not their 36 characters: every event writes this key and
// deletes it, and those deletions are most of what Pebble compacts on the
// events path (layout 4, upgrade.go; docs/deliveries.md "Cost on the write
// path").
func outboxKey(inst, source string, pos uint64) []byte {
	return persistence.AppendUint64(outboxSourcePrefix(inst, source), pos)
}

// outboxKind starts every outbox key after its partition.
const outboxKind = "ob/"

// outboxPrefix covers what the sources of partition p wrote for inst.
func outboxPrefix(p partition.ID, inst string) []byte {
	return appendUUID(outboxesPrefixWithRoom(p, uuidLen), inst)
}

// outboxSourcePrefix is the prefix of what one source wrote for inst.
func outboxSourcePrefix(inst, source string) []byte {
	k := outboxesPrefixWithRoom(partition.Of(source), 2*uuidLen+positionLen)
	return appendUUID(appendUUID(k, inst), source)
}

// outboxesPrefix covers every outbox entry that sources of partition p
// wrote: a restarting node scans it for the installations with events to
// take.
func outboxesPrefix(p partition.ID) []byte { return outboxesPrefixWithRoom(p, 0) }

func outboxesPrefixWithRoom(p partition.ID, room int) []byte {
	b := make([]byte, 0, partition.KeyPrefixLen+len(outboxKind)+room)
	return append(partition.AppendKeyPrefix(b, p), outboxKind...)
}

// outboxInstallation is the installation of an outbox key.
func outboxInstallation(k []byte) string {
	return uuidString(k[partition.KeyPrefixLen+len(outboxKind):])
}

// outboxSource is the source and position of an outbox key.
func outboxSource(k []byte) (source string, pos uint64) {
	rest := k[partition.KeyPrefixLen+len(outboxKind)+uuidLen:]
	return uuidString(rest), decodeSeq(rest[uuidLen:])
}

// OutboxEntry reads an outbox key (KeyKind "outboxKey") of a data
// directory, for tools and tests: the installation the entry is for, the
// source that wrote it and its position there.
func OutboxEntry(k []byte) (inst, source string, pos uint64) {
	source, pos = outboxSource(k)
	return outboxInstallation(k), source, pos
}

// uuidLen is the length of an id in a key that holds its bytes.
const uuidLen = 16

// appendUUID appends the 16 bytes of id, a UUID in its canonical form,
// which every id of the package is (ids.New): another is a bug, never
// input, since these keys are built only for records the actors wrote.
func appendUUID(dst []byte, id string) []byte {
	u, ok := canonicalUUID(id)
	if !ok {
		panic(fmt.Sprintf("actors: a key of an id that is no canonical UUID: %q", id))
	}
	return append(dst, u[:]...)
}

// canonicalUUID is id's bytes, when id is a UUID in the form uuidString
// gives back: 36 characters, lower-case hex digits and four dashes.
func canonicalUUID(id string) (u uuid.UUID, ok bool) {
	if len(id) != 36 {
		return u, false
	}
	for i, j := 0, 0; i < len(id); {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if id[i] != '-' {
				return u, false
			}
			i++
			continue
		}
		hi, lo := hexValue(id[i]), hexValue(id[i+1])
		if hi > 15 || lo > 15 {
			return u, false
		}
		u[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return u, true
}

// hexValue is the value of a lower-case hex digit, or 16 for another byte.
func hexValue(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 16
}

// uuidString is the canonical form of the id whose 16 bytes b starts
// with.
func uuidString(b []byte) string {
	u, _ := uuid.FromBytes(b[:uuidLen])
	return u.String()
}

// Outbox keys of layouts before 4, with ids as text: only the upgrade
// step that rewrites them and CurrentKey read them.

// textOutboxKind starts an outbox key of layouts before 4 after its
// partition.
const textOutboxKind = "outbox/"

// textOutboxesPrefix covers the outbox entries of partition p as layouts
// before 4 stored them.
func textOutboxesPrefix(p partition.ID) []byte { return key(p, "outbox", "") }

// textOutboxKeyNow is the key that k, an outbox key with its ids as text,
// is stored under now; ok is false when k is no such key. It allocates
// only for one.
func textOutboxKeyNow(k []byte) (now []byte, ok bool) {
	if _, partitioned := partition.OfKey(k); !partitioned || !bytes.HasPrefix(k[partition.KeyPrefixLen:], []byte(textOutboxKind)) {
		return nil, false
	}
	rest := k[partition.KeyPrefixLen+len(textOutboxKind):]
	inst := rest[:partLen(rest)]
	rest = rest[min(len(inst)+1, len(rest)):]
	source := rest[:partLen(rest)]
	rest = rest[min(len(source)+1, len(rest)):]
	_, instOK := canonicalUUID(string(inst))
	_, sourceOK := canonicalUUID(string(source))
	if !instOK || !sourceOK || len(rest) != positionLen {
		return nil, false
	}
	return persistence.AppendUint64(outboxSourcePrefix(string(inst), string(source)), decodeSeq(rest)), true
}

// CurrentKey is the key this build stores k under, for a k that an older
// layout wrote and that reaches the store after the node's upgrade: in a
// raft entry or a snapshot of a build before layout 4, applied again or
// sent by a node not yet upgraded. Any other k is returned as it is.
func CurrentKey(k []byte) []byte {
	if now, ok := textOutboxKeyNow(k); ok {
		return now
	}
	return k
}

func eventSequenceKey(inst string) []byte { return key(partition.Of(inst), "dlv", inst, "seq") }

// The records of an installation's deliveries by sequence, one range per
// state: queued (q), taken by a commit of the sequencer (t: under the
// sequence of its first event), dead letters (x), delivered (d).
const (
	queuedEvents    = "q"
	takenEvents     = "t"
	deadEvents      = "x"
	deliveredEvents = "d"
)

// deliveryRecordKey is inst's record of state at sequence seq.
func deliveryRecordKey(inst, state string, seq uint64) []byte {
	return persistence.AppendUint64(keyWithRoom(partition.Of(inst), positionLen, "dlv", inst, state, ""), seq)
}

// deliveryRecordsPrefix covers inst's records of state.
func deliveryRecordsPrefix(inst, state string) []byte {
	return key(partition.Of(inst), "dlv", inst, state, "")
}

func queuedEventKey(inst string, seq uint64) []byte {
	return deliveryRecordKey(inst, queuedEvents, seq)
}
func queuedEventsPrefix(inst string) []byte { return deliveryRecordsPrefix(inst, queuedEvents) }

// takenEventsKey is the record of the outbox entries one commit of the
// sequencer took, the first under sequence first.
func takenEventsKey(inst string, first uint64) []byte {
	return deliveryRecordKey(inst, takenEvents, first)
}
func takenEventsPrefix(inst string) []byte { return deliveryRecordsPrefix(inst, takenEvents) }

func deadEventKey(inst string, seq uint64) []byte { return deliveryRecordKey(inst, deadEvents, seq) }
func deadEventsPrefix(inst string) []byte         { return deliveryRecordsPrefix(inst, deadEvents) }

func deliveredEventKey(inst string, seq uint64) []byte {
	return deliveryRecordKey(inst, deliveredEvents, seq)
}
func deliveredEventsPrefix(inst string) []byte { return deliveryRecordsPrefix(inst, deliveredEvents) }

func deliveryEndpointKey(inst string) []byte { return key(partition.Of(inst), "dlv", inst, "ep") }

// deliveriesPrefix covers the delivery records of the installations of
// partition p: a restarting node scans it for the installations with
// events to send.
func deliveriesPrefix(p partition.ID) []byte { return key(p, "dlv", "") }

// deliveryPrefix covers one installation's delivery records.
func deliveryPrefix(inst string) []byte { return key(partition.Of(inst), "dlv", inst, "") }

// deliveryInstallation is the installation of a delivery record's key.
func deliveryInstallation(k []byte) string {
	rest := k[len(deliveriesPrefix(0)):]
	return string(rest[:partLen(rest)])
}

// KeyKind names the constructor that builds k ("messageKey",
// "credentialKey", ...), or "" when none does: tests and tools that read a
// data directory check its keys with it. A key under another partition
// than its owner's is built by none.
func KeyKind(k []byte) string {
	for _, s := range nodeKeyShapes {
		if _, ok := matchShape(s.shape, k); ok {
			return s.constructor
		}
	}
	p, ok := partition.OfKey(k)
	if !ok {
		return ""
	}
	kind, owner := unpartitionedKind(k[partition.KeyPrefixLen:])
	if owner != p && !writerPartitioned[kind] {
		return ""
	}
	return kind
}

// unpartitionedKind is the constructor of a key without its partition
// prefix, and the partition its owner belongs to; "" when none builds it.
func unpartitionedKind(k []byte) (string, partition.ID) {
	for _, s := range keyShapes {
		if owner, ok := matchShape(s.shape, k); ok {
			return s.constructor, owner
		}
	}
	return "", 0
}

// unpartitioned is k as layouts before 2 stored it; only their upgrade
// steps use it.
func unpartitioned(k []byte) []byte { return k[partition.KeyPrefixLen:] }

// partitionedKey is the key that k, stored by a layout before 2, moves to:
// k under the partition of its owner. ok is false for a key of the node
// itself, which stays, and an error names a key no constructor built.
func partitionedKey(k []byte) (moved []byte, ok bool, err error) {
	if _, ok := partition.OfKey(k); ok {
		return nil, false, nil
	}
	for _, s := range nodeKeyShapes {
		if _, ok := matchShape(s.shape, k); ok {
			return nil, false, nil
		}
	}
	kind, owner := unpartitionedKind(k)
	if kind == "" {
		prefix, _, _ := strings.Cut(string(k), "/")
		return nil, false, fmt.Errorf("a key under %q that no constructor builds", prefix)
	}
	return append(partition.AppendKeyPrefix(make([]byte, 0, partition.KeyPrefixLen+len(k)), owner), k...), true, nil
}

// matchShape reports whether k has shape (see keyShapes), and the
// partition its first field names.
func matchShape(shape string, k []byte) (owner partition.ID, ok bool) {
	first := true
	for shape != "" {
		if shape[0] != '{' {
			if len(k) == 0 || k[0] != shape[0] {
				return 0, false
			}
			shape, k = shape[1:], k[1:]
			continue
		}
		end := strings.IndexByte(shape, '}')
		field := shape[1:end]
		n := fieldLen(field, k)
		if n <= 0 {
			return 0, false
		}
		if first {
			owner, first = fieldPartition(field, k[:n]), false
		}
		shape, k = shape[end+1:], k[n:]
	}
	return owner, len(k) == 0
}

// fieldPartition is the partition that a key's first field names.
func fieldPartition(field string, b []byte) partition.ID {
	switch field {
	case "hash":
		return partition.OfHash(b)
	case "hex64":
		h, _ := hex.DecodeString(string(b)) // fieldLen checked the digits
		return partition.OfHash(h)
	case "hex8":
		tag, _ := strconv.ParseUint(string(b), 16, 32)
		return partition.OfTag(uint32(tag))
	case "uuid":
		return partition.Of(uuidString(b))
	}
	return partition.Of(string(b))
}

// fieldLen is how many bytes at the start of k the field takes; 0 when k
// does not start with one.
func fieldLen(field string, k []byte) int {
	switch field {
	case "id":
		return partLen(k)
	case "pos":
		return fixedLen(k, positionLen, nil)
	case "uuid":
		return fixedLen(k, uuidLen, nil)
	case "hash":
		return fixedLen(k, 32, nil)
	case "hex64":
		return fixedLen(k, 64, isHex)
	case "hex8":
		return fixedLen(k, 8, isHex)
	case "version":
		n := partLen(k)
		if v := string(k[:n]); len(v) < 5 || strings.Count(v, ".") != 2 || strings.Trim(v, "0123456789.") != "" {
			return 0
		}
		return n
	case "rest":
		return len(k)
	}
	panic("actors: unknown key field {" + field + "}")
}

// partLen is the length of k up to its next '/'.
func partLen(k []byte) int {
	for i, c := range k {
		if c == '/' {
			return i
		}
	}
	return len(k)
}

func fixedLen(k []byte, n int, valid func(byte) bool) int {
	if len(k) < n {
		return 0
	}
	for _, c := range k[:n] {
		if valid != nil && !valid(c) {
			return 0
		}
	}
	return n
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
