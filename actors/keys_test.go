package actors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
)

// Every constructor, with the bytes it must build: existing data
// directories hold these, so a change here is a migration, not a refactor.
func TestKeyLayout(t *testing.T) {
	hash := bytes.Repeat([]byte{'/'}, 32) // a hash may hold any byte, '/' too
	seq := uint64('/')<<56 | 2            // so may a position
	pos := func(v uint64) string { return string([]byte{byte(v >> 56), 0, 0, 0, 0, 0, 0, byte(v)}) }
	for _, tc := range []struct {
		constructor string
		key         []byte
		want        string
	}{
		{"workspaceKey", workspaceKey("w"), under(partition.Of("w"), "ws/w")},
		{"userKey", userKey("w", "u"), under(partition.Of("w"), "ws/w/u/u")},
		{"installedKitKey", installedKitKey("w", "k"), under(partition.Of("w"), "ws/w/k/k")},
		{"installationEventsKey", installationEventsKey("w", "i"), under(partition.Of("w"), "ws/w/ie/i")},
		{"sessionKey", sessionKey("w", "s"), under(partition.Of("w"), "ws/w/s/s")},
		{"sessionSecretKey", sessionSecretKey("w", "s"), under(partition.Of("w"), "ws/w/sh/s")},
		{"developerTokenKey", developerTokenKey("w", "t"), under(partition.Of("w"), "ws/w/d/t")},
		{"signInChoiceKey", signInChoiceKey("w", int64(seq), hash), under(partition.Of("w"), "ws/w/sc/"+pos(seq)+string(hash))},
		{"conversationKey", conversationKey("c"), under(partition.Of("c"), "conv/c")},
		{"memberKey", memberKey("c", "u"), under(partition.Of("c"), "conv/c/m/u")},
		{"botMemberKey", botMemberKey("c", "b"), under(partition.Of("c"), "conv/c/b/b")},
		{"messageKey", messageKey("c", seq), under(partition.Of("c"), "conv/c/s/"+pos(seq))},
		{"threadReplyKey", threadReplyKey("c", 1, seq), under(partition.Of("c"), "conv/c/t/"+pos(1)+pos(seq))},
		{"idempotencyKey", idempotencyKey("c", "user", "u", "k/1"), under(partition.Of("c"), "conv/c/p/user:u\x00k/1")},
		{"idempotencyExpiryKey", idempotencyExpiryKey("c", int64(seq), idempotencyKey("c", "user", "u", "k/1")), under(partition.Of("c"), "conv/c/pe/"+pos(seq)+"user:u\x00k/1")},
		{"fileKey", fileKey("c", "f"), under(partition.Of("c"), "conv/c/f/f")},
		{"fileChunkKey", fileChunkKey("c", "f", seq), under(partition.Of("c"), "conv/c/f/f/"+pos(seq))},
		{"memberConversationKey", memberConversationKey("u", "c"), under(partition.Of("u"), "uc/u/c")},
		{"messageTagKey", messageTagKey(0xab, "c"), under(partition.OfTag(0xab), "mtag/000000ab/c")},
		{"installationKey", installationKey("i"), under(partition.Of("i"), "inst/i")},
		{"webhookRefKey", webhookRefKey("i", "w"), under(partition.Of("i"), "inst/i/w/w")},
		{"grantCredentialKey", grantCredentialKey("i", "g", hash), under(partition.Of("i"), "inst/i/g/g/"+string(hash))},
		{"webhookKey", webhookKey("w"), under(partition.Of("w"), "hook/w")},
		{"kitKey", kitKey("k"), under(partition.Of("k"), "kit/k")},
		{"versionKey", versionKey("k", manifest.Version{Major: 1, Minor: 2, Patch: 3}), under(partition.Of("k"), "kit/k/v/0001.00002.000003")},
		{"clientSecretKey", clientSecretKey("k"), under(partition.Of("k"), "kit/k/cs")},
		{"signingSecretKey", signingSecretKey("k"), under(partition.Of("k"), "kit/k/ss")},
		{"domainKey", domainKey("k", "a.example.com"), under(partition.Of("k"), "kit/k/d/a.example.com")},
		{"installLinkKey", installLinkKey("k"), under(partition.Of("k"), "kit/k/il")},
		{"installLinkIndexKey", installLinkIndexKey(hash), under(partition.OfHash(hash), "illink/"+strings.Repeat("2f", 32))},
		{"workspaceKitKey", workspaceKitKey("w", "k"), under(partition.Of("w"), "kits/w/k")},
		{"slugKey", slugKey("s"), under(partition.Of("s"), "slug/s")},
		{"credentialKey", credentialKey(hash), under(partition.OfHash(hash), "cred/"+string(hash))},
		{"locatorKey", locatorKey("x"), under(partition.Of("x"), "loc/x")},
		{"devLogKey", devLogKey(9, "k", "e"), under(9, "devlog/k/e")},
		{"emailUserKey", emailUserKey("a@example.com", "u"), under(partition.OfHash(sha256sum("a@example.com")), "email/"+sha256hex("a@example.com")+"/u")},
		{"layoutKey", layoutKey(), "meta/layout"},
		{"outboxKey", outboxKey(instID, convID, seq), under(partition.Of(convID), "ob/"+string(idBytes(instID))+string(idBytes(convID))+pos(seq))},
		{"eventSequenceKey", eventSequenceKey("i"), under(partition.Of("i"), "dlv/i/seq")},
		{"queuedEventKey", queuedEventKey("i", seq), under(partition.Of("i"), "dlv/i/q/"+pos(seq))},
		{"deadEventKey", deadEventKey("i", seq), under(partition.Of("i"), "dlv/i/x/"+pos(seq))},
	} {
		t.Run(tc.constructor, func(t *testing.T) {
			if string(tc.key) != tc.want {
				t.Errorf("built %q, want %q", tc.key, tc.want)
			}
			if got := KeyKind(tc.key); got != tc.constructor {
				t.Errorf("KeyKind(%q) = %q", tc.key, got)
			}
		})
	}
}

// Each prefix is the start of the keys it scans for, and no key itself.
// Two constructors never build keys of one shape: a scan of one kind's
// prefix would read the other's records as its own (runs and responseUrl
// tokens once shared inst/{id}/r/).
func TestKeyShapesAreDistinct(t *testing.T) {
	placeholder := regexp.MustCompile(`\{[a-z0-9]+\}`)
	seen := map[string]string{}
	for _, ks := range keyShapes {
		generic := placeholder.ReplaceAllString(ks.shape, "{}")
		if other, ok := seen[generic]; ok {
			t.Errorf("%s and %s both build %s", other, ks.constructor, generic)
		}
		seen[generic] = ks.constructor
	}
}

func TestKeyPrefixes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		key    []byte
	}{
		{"usersPrefix", usersPrefix("w"), userKey("w", "u")},
		{"unpartitionedWorkspacesPrefix of a workspace", unpartitionedWorkspacesPrefix(), unpartitioned(workspaceKey("w"))},
		{"unpartitionedWorkspacesPrefix of a user", unpartitionedWorkspacesPrefix(), unpartitioned(userKey("w", "u"))},
		{"partition.KeyRange of a key", lowerOf(partition.Of("c")), messageKey("c", 1)},
		{"emailUsersPrefix", emailUsersPrefix("a@example.com"), emailUserKey("a@example.com", "u")},
		{"installedKitsPrefix", installedKitsPrefix("w"), installedKitKey("w", "k")},
		{"installationEventsPrefix", installationEventsPrefix("w"), installationEventsKey("w", "i")},
		{"membersPrefix", membersPrefix("c"), memberKey("c", "u")},
		{"botMembersPrefix", botMembersPrefix("c"), botMemberKey("c", "b")},
		{"messagesPrefix", messagesPrefix("c"), messageKey("c", 1)},
		{"threadRepliesPrefix", threadRepliesPrefix("c", 1), threadReplyKey("c", 1, 2)},
		{"idempotencyRecordsPrefix", idempotencyRecordsPrefix("c"), idempotencyKey("c", "user", "u", "k")},
		{"idempotencyExpiriesPrefix", idempotencyExpiriesPrefix("c"), idempotencyExpiryKey("c", 1, idempotencyKey("c", "user", "u", "k"))},
		{"filesPrefix of a file", filesPrefix("c"), fileKey("c", "f")},
		{"filesPrefix of a chunk", filesPrefix("c"), fileChunkKey("c", "f", 0)},
		{"fileChunksPrefix", fileChunksPrefix("c", "f"), fileChunkKey("c", "f", 0)},
		{"memberConversationsPrefix", memberConversationsPrefix("u"), memberConversationKey("u", "c")},
		{"messageTagPrefix", messageTagPrefix(7), messageTagKey(7, "c")},
		{"webhookRefsPrefix", webhookRefsPrefix("i"), webhookRefKey("i", "w")},
		{"grantPrefix", grantPrefix("i", "g"), grantCredentialKey("i", "g", make([]byte, 32))},
		{"versionsPrefix", versionsPrefix("k"), versionKey("k", manifest.Version{Major: 1})},
		{"domainsPrefix", domainsPrefix("k"), domainKey("k", "d")},
		{"workspaceKitsPrefix", workspaceKitsPrefix("w"), workspaceKitKey("w", "k")},
		{"devLogPrefix", devLogPrefix(9, "k"), devLogKey(9, "k", "e")},
		{"outboxPrefix", outboxPrefix(partition.Of(convID), instID), outboxKey(instID, convID, 1)},
		{"outboxSourcePrefix", outboxSourcePrefix(instID, convID), outboxKey(instID, convID, 1)},
		{"outboxesPrefix", outboxesPrefix(partition.Of(convID)), outboxKey(instID, convID, 1)},
		{"textOutboxesPrefix", textOutboxesPrefix(partition.Of(convID)), textOutboxKey(instID, convID, 1)},
		{"queuedEventsPrefix", queuedEventsPrefix("i"), queuedEventKey("i", 1)},
		{"deliveriesPrefix", deliveriesPrefix(partition.Of("i")), deadEventKey("i", 1)},
		{"deliveryPrefix", deliveryPrefix("i"), eventSequenceKey("i")},
		{"sessionsPrefix", sessionsPrefix("w"), sessionKey("w", "s")},
		{"signInChoicesPrefix", signInChoicesPrefix("w"), signInChoiceKey("w", 1, make([]byte, 32))},
		{"grantsPrefix", grantsPrefix("i"), grantCredentialKey("i", "g", make([]byte, 32))},
		{"runsPrefix", runsPrefix("i"), runKey("i", "r")},
		{"openRunsPrefix", openRunsPrefix("i"), openRunKey("i", "r")},
		{"responseURLsPrefix", responseURLsPrefix("i"), responseURLKey("i", make([]byte, 32))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.HasPrefix(tc.key, tc.prefix) {
				t.Errorf("%q is not under %q", tc.key, tc.prefix)
			}
			if kind := KeyKind(tc.prefix); kind != "" {
				t.Errorf("the prefix %q reads as a %s", tc.prefix, kind)
			}
		})
	}
	t.Run("a file's chunks are not under the prefix of a file whose id extends it", func(t *testing.T) {
		if bytes.HasPrefix(fileChunkKey("c", "f2", 0), fileChunksPrefix("c", "f")) {
			t.Fatal("overlap")
		}
	})
}

func TestKeyKindOfWhatNoConstructorBuilds(t *testing.T) {
	for _, k := range []string{
		"", "ws", "ws/", "ws/w/", "ws/w/e/x@example.com", "conv/c/s/short", "conv/c/s/" + strings.Repeat("x", 9),
		"cred/" + strings.Repeat("x", 31), "mtag/0000000g/c", "kit/k/v/1.2", "kit/k/cs/x", "loc/", "other/x",
	} {
		if got := KeyKind([]byte(k)); got != "" {
			t.Errorf("KeyKind(%q) = %q, want none", k, got)
		}
		for p := range partition.ID(partition.Count) {
			if got := KeyKind([]byte(under(p, k))); got != "" {
				t.Errorf("KeyKind(%q) = %q, want none", under(p, k), got)
			}
		}
	}
}

// Every key of the package is built in keys.go: the layout must be a change
// of one file when keys gain a partition. Outside keys.go, production code
// may neither call the raw joiners nor spell a key's first part.
func TestKeysAreBuiltOnlyInKeysGo(t *testing.T) {
	rawJoiners := map[string]bool{"key": true, "keyWithRoom": true}
	var prefixes []string
	for _, s := range keyShapes {
		if p := s.shape[:strings.IndexByte(s.shape, '/')+1]; !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if name == "keys.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && rawJoiners[id.Name] {
					t.Errorf("%s: %s(...) builds a key by hand; add a constructor to keys.go", fset.Position(n.Pos()), id.Name)
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					break
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					t.Fatalf("%s: %v", fset.Position(n.Pos()), err)
				}
				for _, p := range prefixes {
					if strings.HasPrefix(s, p) {
						t.Errorf("%s: %q spells a key prefix; use a constructor of keys.go", fset.Position(n.Pos()), s)
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func under(p partition.ID, rest string) string {
	return string(partition.AppendKeyPrefix(nil, p)) + rest
}

func sha256sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func lowerOf(p partition.ID) []byte {
	lower, _ := partition.KeyRange(p)
	return lower
}

// A partition's records are one key range: a key built for an owner lies in
// the range of the owner's partition and in no other.
func TestKeysLieInTheRangeOfTheirOwnersPartition(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		key   []byte
		owner partition.ID
	}{
		{"a message lies in its conversation's partition", messageKey("c", 9), partition.Of("c")},
		{"a user lies in its workspace's partition", userKey("w", "u"), partition.Of("w")},
		{"a member's conversation index lies in the member's partition", memberConversationKey("u", "c"), partition.Of("u")},
		{"a tag index entry lies in its conversation's partition", messageTagKey(ids.MessageTag("c"), "c"), partition.Of("c")},
		{"a credential lies in its hash's partition", credentialKey(sha256sum("kbt_x")), partition.OfHash(sha256sum("kbt_x"))},
		{"a slug lies in its own partition", slugKey("acme"), partition.Of("acme")},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			for p := range partition.ID(partition.Count) {
				lower, upper := partition.KeyRange(p)
				in := bytes.Compare(tc.key, lower) >= 0 && bytes.Compare(tc.key, upper) < 0
				if in != (p == tc.owner) {
					t.Errorf("%q in the range of partition %d: %v (owner %d)", tc.key, p, in, tc.owner)
				}
			}
		})
	}
}

func TestKeyKindRefusesAKeyUnderAnotherPartition(t *testing.T) {
	k := workspaceKey("w")
	wrong := under((partition.Of("w")+1)%partition.Count, string(unpartitioned(k)))
	if got := KeyKind([]byte(wrong)); got != "" {
		t.Errorf("KeyKind(%q) = %q, want none", wrong, got)
	}
	if got := KeyKind(unpartitioned(k)); got != "" {
		t.Errorf("KeyKind of a key without its partition = %q, want none", got)
	}
	// A developer log entry lives in its writer's partition, whichever.
	for p := range partition.ID(partition.Count) {
		if got := KeyKind(devLogKey(p, "k", "e")); got != "devLogKey" {
			t.Errorf("KeyKind of an entry written in partition %d = %q", p, got)
		}
	}
}

// What Upgrade does to each key of a layout before partitions.
func TestPartitionedKeyOfAnOlderLayout(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		old     []byte
		want    []byte // nil: the key stays
		wantErr bool
	}{
		{"a record moves under its owner's partition", unpartitioned(messageKey("c", 3)), messageKey("c", 3), false},
		{"an index by hash moves under the hash's partition", unpartitioned(credentialKey(sha256sum("x"))), credentialKey(sha256sum("x")), false},
		{"an index by hex hash moves under the hash's partition", unpartitioned(emailUserKey("a@example.com", "u")), emailUserKey("a@example.com", "u"), false},
		{"a tag index entry moves under its tag's partition", unpartitioned(messageTagKey(0xab, "c")), messageTagKey(0xab, "c"), false},
		{"the node's own key stays", layoutKey(), nil, false},
		{"a key already under its partition stays", messageKey("c", 3), nil, false},
		{"a key no constructor builds is an error", []byte("other/x"), nil, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, ok, err := partitionedKey(tc.old)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if ok != (tc.want != nil) || !bytes.Equal(got, tc.want) {
				t.Errorf("partitionedKey(%q) = %q, %v; want %q", tc.old, got, ok, tc.want)
			}
		})
	}
}

// Ids of the keys that hold an id's bytes; a slash in their bytes
// (0x2f) shows that a decoder takes them by length.
const (
	instID = "2f2f2f2f-0000-7000-8000-00000000002f"
	convID = "0192f2c1-7a4b-7c3d-9e8f-a1b2c3d4e5f6"
)

func idBytes(id string) []byte {
	u := uuid.MustParse(id)
	return u[:]
}

// textOutboxKey is an outbox key as layouts before 4 wrote it.
func textOutboxKey(inst, source string, pos uint64) []byte {
	return persistence.AppendUint64(key(partition.Of(source), "outbox", inst, source, ""), pos)
}

// Keys hold the bytes of an id only in the form that reads back the same.
func TestCanonicalUUID(t *testing.T) {
	for _, tc := range []struct {
		rule string
		id   string
		ok   bool
	}{
		{"a UUID in lower case", instID, true},
		{"a fresh id", ids.New(), true},
		{"upper case is another spelling", strings.ToUpper(convID), false},
		{"a dash out of place", "0192f2c17-a4b-7c3d-9e8f-a1b2c3d4e5f6", false},
		{"a digit that is no hex", "0192f2c1-7a4b-7c3d-9e8f-a1b2c3d4e5fg", false},
		{"braces", "{0192f2c1-7a4b-7c3d-9e8f-a1b2c3d4e5}", false},
		{"too short", convID[:35], false},
		{"empty", "", false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			u, ok := canonicalUUID(tc.id)
			if ok != tc.ok {
				t.Fatalf("canonicalUUID(%q) ok = %v, want %v", tc.id, ok, tc.ok)
			}
			if ok && u.String() != tc.id {
				t.Fatalf("canonicalUUID(%q) reads back as %q", tc.id, u.String())
			}
		})
	}
}

// The outbox key's parts read back as they were built.
func TestOutboxKeyReadsBack(t *testing.T) {
	seq := uint64('/')<<56 | '/'
	k := outboxKey(instID, convID, seq)
	if got := outboxInstallation(k); got != instID {
		t.Errorf("installation %q, want %q", got, instID)
	}
	if source, pos := outboxSource(k); source != convID || pos != seq {
		t.Errorf("source %q at %d, want %q at %d", source, pos, convID, seq)
	}
}

// What CurrentKey makes of the keys an older build's raft entry or
// snapshot may carry after this node's upgrade.
func TestCurrentKey(t *testing.T) {
	upper := "2F2F2F2F-0000-7000-8000-00000000002F"
	for _, tc := range []struct {
		rule string
		k    []byte
		want []byte
	}{
		{"an outbox key with text ids gets its ids' bytes", textOutboxKey(instID, convID, 9), outboxKey(instID, convID, 9)},
		{"an outbox key of today stays", outboxKey(instID, convID, 9), outboxKey(instID, convID, 9)},
		{"a message key stays", messageKey(convID, 9), messageKey(convID, 9)},
		{"a delivery record stays", deliveredEventKey(instID, 9), deliveredEventKey(instID, 9)},
		{"the node's own key stays", layoutKey(), layoutKey()},
		{"an empty key stays", []byte{}, []byte{}},
		{"a text outbox key of an id in upper case stays (no build wrote one)", textOutboxKey(upper, convID, 9), textOutboxKey(upper, convID, 9)},
		{"a text outbox key without its position stays", key(partition.Of(convID), "outbox", instID, convID), key(partition.Of(convID), "outbox", instID, convID)},
		{"a text outbox key with a short position stays", key(partition.Of(convID), "outbox", instID, convID, "1234567"), key(partition.Of(convID), "outbox", instID, convID, "1234567")},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := CurrentKey(tc.k); !bytes.Equal(got, tc.want) {
				t.Errorf("CurrentKey(%q) = %q, want %q", tc.k, got, tc.want)
			}
		})
	}
}

// Every replica runs CurrentKey on every key it applies: a key it leaves
// as it is costs no allocation.
func TestCurrentKeyOfATodaysKeyAllocatesNothing(t *testing.T) {
	k := messageKey(convID, 7)
	if n := leastAllocs(100, func() { CurrentKey(k) }); n != 0 {
		t.Fatalf("CurrentKey allocates %v times, want 0", n)
	}
}

// A post builds its message key: one allocation, the key itself.
func TestMessageKeyAllocatesOnce(t *testing.T) {
	conv := ids.New()
	if n := leastAllocs(100, func() { messageKey(conv, 7) }); n != 1 {
		t.Fatalf("messageKey allocates %v times, want 1", n)
	}
}

// An event builds its outbox key: one allocation, the key itself.
func TestOutboxKeyAllocatesOnce(t *testing.T) {
	if n := leastAllocs(100, func() { outboxKey(instID, convID, 7) }); n != 1 {
		t.Fatalf("outboxKey allocates %v times, want 1", n)
	}
}

// An expiry index entry names its record and the member-wide copy back,
// and sorts by expiry: the entries due at a time are those before
// idempotencyExpiriesBefore of the next nanosecond.
func TestIdempotencyExpiryKeyReadsBack(t *testing.T) {
	rec, memberWide := idempotencyKey("c", "user", "u/i", "k/1\x00"), idempotencyKey("c", "user", "u", "k/1\x00")
	k := idempotencyExpiryKey("c", 1<<40, rec)
	got := idempotencyExpiryRecords("c", k, idempotencyRest("c", memberWide))
	if len(got) != 2 || !bytes.Equal(got[0], rec) || !bytes.Equal(got[1], memberWide) {
		t.Fatalf("records of the entry: %q, want %q and %q", got, rec, memberWide)
	}
	if got := idempotencyExpiryRecords("c", k, nil); len(got) != 1 || !bytes.Equal(got[0], rec) {
		t.Fatalf("records of an entry without a copy: %q, want %q", got, rec)
	}
	if before := idempotencyExpiriesBefore("c", 1<<40); bytes.Compare(k, before) < 0 {
		t.Error("an entry sorts before the bound of its own expiry")
	}
	if after := idempotencyExpiriesBefore("c", 1<<40+1); bytes.Compare(k, after) >= 0 {
		t.Error("an entry sorts after the bound of the nanosecond after its expiry")
	}
	if later := idempotencyExpiryKey("c", 1<<40+1, idempotencyKey("c", "bot", "b", "a")); bytes.Compare(k, later) >= 0 {
		t.Error("entries are not in order of expiry")
	}
}
