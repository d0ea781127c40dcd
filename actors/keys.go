package actors

import (
	"fmt"

	"github.com/kitd/kitd/persistence"
)

// Storage key layout. Each actor writes only under its own prefix (and the
// locator and credential records of the things it owns), so the actor is the
// only writer of every key it reads back.
//
//	ws/<ws>                      Workspace
//	ws/<ws>/u/<user>             User (ids are UUIDv7: the scan is creation order)
//	ws/<ws>/e/<email>            user id (email uniqueness per workspace)
//	ws/<ws>/k/<kit>              installation id of the Kit in this workspace
//	ws/<ws>/s/<session>          Session
//	ws/<ws>/d/<token id>         SHA-256 of a developer token
//	conv/<c>                     Conversation
//	conv/<c>/m/<user>            Member
//	conv/<c>/b/<bot>             BotMember
//	conv/<c>/s/<seq>             Message, in conversation order (stored without its
//	                             conversation id, which the key carries)
//	conv/<c>/t/<parent seq>/<seq>  thread index (empty value)
//	conv/<c>/p/<caller>\x00<key>  Idempotency
//	conv/<c>/f/<file>            File (metadata; loc/<file> names the conversation)
//	conv/<c>/f/<file>/<n>        chunk n of the file's bytes (at most FileChunkSize)
//	uc/<user>/<c>                a member's conversations (written by conversation c)
//	mtag/<tag>/<c>               conversation c's message-id tag (8 hex digits; empty value):
//	                             finds the conversation of a message id (ids.NewMessage)
//	inst/<i>                     Installation
//	inst/<i>/w/<webhook>         WebhookRef (the installation's webhooks)
//	inst/<i>/g/<grant>/<sha256>  credentials of one authorization (empty value; docs/credentials.md)
//	hook/<w>                     Webhook (written by webhook actor w)
//	kit/<k>                      Kit
//	kit/<k>/v/<sortable version> KitVersion
//	kit/<k>/cs, kit/<k>/ss       SecretState of the client secret, of the signing secret
//	kit/<k>/d/<domain>           KitDomain
//	kit/<k>/il                   InstallLink: hash and creation time of the current install link
//	illink/<hex sha256>          kit id of an install link (written with kit/<k>/il by the kit actor)
//	kits/<ws>/<k>                Kits owned by a workspace (empty value)
//	slug/<slug>                  kit id
//	cred/<sha256>                Credential (bot, user, refresh, code, developer, session)
//	loc/<id>                     Locator: which actor owns id (messages have none: their ids
//	                             say it, except those written before 2026-11-22)
//	devlog/<kit>/<entry>         DevLogEntry (stored without its id, which the key carries):
//	                             written once, in the batch of the outcome it
//	                             reports, by whichever actor decided it (see devlog.go;
//	                             the kit actor: uploads, publishes, domains, install links;
//	                             the installation: token issues and refusals); expired after
//	                             LogRetention by range deletion
const (
	pWorkspace    = "ws/"
	pConversation = "conv/"
	pInstallation = "inst/"
	pKit          = "kit/"
	pWorkspaceKit = "kits/"
	pSlug         = "slug/"
	pCredential   = "cred/"
	pLocator      = "loc/"
)

func key(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, p...)
	}
	return b
}

func seqKey(prefix []byte, seq uint64) []byte {
	k := make([]byte, 0, len(prefix)+8)
	k = append(k, prefix...)
	return persistence.AppendUint64(k, seq)
}

// messagesPrefix is the prefix of a conversation's messages.
func messagesPrefix(conversationID string) []byte {
	return key("conv", conversationID, "s", "")
}

func messageTagKey(tag uint32, conversationID string) []byte {
	return fmt.Appendf(nil, "mtag/%08x/%s", tag, conversationID)
}

func credentialKey(hash []byte) []byte {
	k := make([]byte, 0, len(pCredential)+len(hash))
	k = append(k, pCredential...)
	return append(k, hash...)
}
