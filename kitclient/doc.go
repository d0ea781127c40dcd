// Package kitclient is a Go client of kitd's Web API for Kit backends: every
// method of docs/api.md "Endpoints" (auth, conversations, messages, reactions,
// files, users, runs, installation), the code exchange of
// POST /oauth/kit.access, and incoming-webhook posts.
//
// It speaks only the wire contract and imports the standard library only,
// never kitd's packages, so a Kit's backend can take it alone. The request and
// answer types in this package are the wire types; the developer API's are
// in the sibling package kitclient/dev.
//
// # Errors
//
// An answer other than 2xx is an [*Error]: the docs/api.md "Errors" error body
// (code, message, correlationId), its HTTP status, the field path a
// validation error names, and the rate-limit state the answer carried.
//
// # Retries
//
// A call is retried, up to [RetryPolicy.MaxAttempts] attempts in all, when
// retrying cannot do anything twice:
//
//   - a 429 is always retried, after its Retry-After: the server refused the
//     request before doing any of it;
//   - reads (GET) are retried after a network failure or a 500, 502, 503 or
//     504, with a jittered exponential backoff;
//   - a write is retried after those only when it carries an
//     Idempotency-Key. [Client.PostMessage] sends one on every call (a
//     random key per call, the same on each of its retries), so a post that
//     got through before its answer was lost is answered with the stored
//     message instead of being posted twice. Other writes are never retried
//     after a failure that may have left them half done (docs/api.md "Errors":
//     retry writes only with an Idempotency-Key).
//
// The RateLimit and RateLimit-Policy headers of every answer say how many
// requests a bucket has left; when an answer says a bucket of the token's
// installation (read, write, files) or a [Webhook]'s bucket is empty, the
// next call that spends it waits for its next token instead of being
// refused. A wait longer than [RetryPolicy.MaxWait], or one that would
// outlast the context's deadline, is not made: the call is sent, and
// returns the 429 if the server refuses it. A cancelled context ends a
// wait at once.
//
// # Lists
//
// Paged lists come two ways: a ...Page method returns one page and its
// NextCursor, and an iterator method (e.g. [Client.Conversations]) walks
// every page and stops after the page whose nextCursor is null.
//
// See the examples for a tour; each runs against an httptest server.
package kitclient
