// Package actors holds the rules and state of kitd. Each owner of
// docs/architecture.md "Ownership" is a virtual actor kind (workspace, conversation,
// installation, kit, slug): the only writer of its state, deciding every
// rule that needs that state (visibility, ordering, idempotency, tombstones,
// rate buckets) in one place without locks. A write is answered only after
// its batch is durable in Pebble.
//
// Persistence model: an actor stores its state as one record per entity
// (the conversation, each member, each message, ...) and every write commits
// the records it changes in one synced batch. The stored records are
// therefore always a complete, current snapshot of the actor; activation
// reads its own key range and there is nothing to replay.
//
// The package never talks HTTP: requests and replies are kitpb messages and
// errors are kiterr values.
package actors
