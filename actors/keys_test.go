package actors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/manifest"
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
		{"workspaceKey", workspaceKey("w"), "ws/w"},
		{"userKey", userKey("w", "u"), "ws/w/u/u"},
		{"installedKitKey", installedKitKey("w", "k"), "ws/w/k/k"},
		{"sessionKey", sessionKey("w", "s"), "ws/w/s/s"},
		{"sessionSecretKey", sessionSecretKey("w", "s"), "ws/w/sh/s"},
		{"developerTokenKey", developerTokenKey("w", "t"), "ws/w/d/t"},
		{"conversationKey", conversationKey("c"), "conv/c"},
		{"memberKey", memberKey("c", "u"), "conv/c/m/u"},
		{"botMemberKey", botMemberKey("c", "b"), "conv/c/b/b"},
		{"messageKey", messageKey("c", seq), "conv/c/s/" + pos(seq)},
		{"threadReplyKey", threadReplyKey("c", 1, seq), "conv/c/t/" + pos(1) + pos(seq)},
		{"idempotencyKey", idempotencyKey("c", "user", "u", "k/1"), "conv/c/p/user:u\x00k/1"},
		{"fileKey", fileKey("c", "f"), "conv/c/f/f"},
		{"fileChunkKey", fileChunkKey("c", "f", seq), "conv/c/f/f/" + pos(seq)},
		{"memberConversationKey", memberConversationKey("u", "c"), "uc/u/c"},
		{"messageTagKey", messageTagKey(0xab, "c"), "mtag/000000ab/c"},
		{"installationKey", installationKey("i"), "inst/i"},
		{"webhookRefKey", webhookRefKey("i", "w"), "inst/i/w/w"},
		{"grantCredentialKey", grantCredentialKey("i", "g", hash), "inst/i/g/g/" + string(hash)},
		{"webhookKey", webhookKey("w"), "hook/w"},
		{"kitKey", kitKey("k"), "kit/k"},
		{"versionKey", versionKey("k", manifest.Version{Major: 1, Minor: 2, Patch: 3}), "kit/k/v/0001.00002.000003"},
		{"clientSecretKey", clientSecretKey("k"), "kit/k/cs"},
		{"signingSecretKey", signingSecretKey("k"), "kit/k/ss"},
		{"domainKey", domainKey("k", "a.example.com"), "kit/k/d/a.example.com"},
		{"installLinkKey", installLinkKey("k"), "kit/k/il"},
		{"installLinkIndexKey", installLinkIndexKey(hash), "illink/" + strings.Repeat("2f", 32)},
		{"workspaceKitKey", workspaceKitKey("w", "k"), "kits/w/k"},
		{"slugKey", slugKey("s"), "slug/s"},
		{"credentialKey", credentialKey(hash), "cred/" + string(hash)},
		{"locatorKey", locatorKey("x"), "loc/x"},
		{"devLogKey", devLogKey("k", "e"), "devlog/k/e"},
		{"emailUserKey", emailUserKey("a@example.com", "u"), "email/" + sha256hex("a@example.com") + "/u"},
		{"layoutKey", layoutKey(), "meta/layout"},
		{"outboxKey", outboxKey("i", "c", seq), "outbox/i/c/" + pos(seq)},
		{"eventSequenceKey", eventSequenceKey("i"), "dlv/i/seq"},
		{"queuedEventKey", queuedEventKey("i", seq), "dlv/i/q/" + pos(seq)},
		{"deadEventKey", deadEventKey("i", seq), "dlv/i/x/" + pos(seq)},
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
func TestKeyPrefixes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		key    []byte
	}{
		{"usersPrefix", usersPrefix("w"), userKey("w", "u")},
		{"workspacesPrefix of a workspace", workspacesPrefix(), workspaceKey("w")},
		{"workspacesPrefix of a user", workspacesPrefix(), userKey("w", "u")},
		{"emailUsersPrefix", emailUsersPrefix("a@example.com"), emailUserKey("a@example.com", "u")},
		{"installedKitsPrefix", installedKitsPrefix("w"), installedKitKey("w", "k")},
		{"membersPrefix", membersPrefix("c"), memberKey("c", "u")},
		{"botMembersPrefix", botMembersPrefix("c"), botMemberKey("c", "b")},
		{"messagesPrefix", messagesPrefix("c"), messageKey("c", 1)},
		{"threadRepliesPrefix", threadRepliesPrefix("c", 1), threadReplyKey("c", 1, 2)},
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
		{"devLogPrefix", devLogPrefix("k"), devLogKey("k", "e")},
		{"outboxPrefix", outboxPrefix("i"), outboxKey("i", "c", 1)},
		{"outboxSourcePrefix", outboxSourcePrefix("i", "c"), outboxKey("i", "c", 1)},
		{"outboxesPrefix", outboxesPrefix(), outboxKey("i", "c", 1)},
		{"queuedEventsPrefix", queuedEventsPrefix("i"), queuedEventKey("i", 1)},
		{"deliveriesPrefix", deliveriesPrefix(), deadEventKey("i", 1)},
		{"deliveryPrefix", deliveryPrefix("i"), eventSequenceKey("i")},
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
