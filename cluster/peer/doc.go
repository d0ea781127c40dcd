// Package peer is the node-to-node transport of a kitd cluster: requests
// forwarded to a partition's leader, Raft's messages, and snapshots, over
// mutual TLS between members only. It owns the wire (connections, frames,
// authentication) and never looks inside a message: it resolves message
// names through the Registry it is given and hands what arrives to the
// handlers of its Config.
//
// # Who may talk
//
// Every connection is TLS 1.3 with a certificate on both sides. With a
// cluster key (--cluster-key), a CA key is derived from it with
// HKDF-SHA256 (fixed info string) into an Ed25519 seed, and the CA
// certificate is built from fixed fields, so every member builds the same
// one and nothing but the secret is distributed. Each node makes a fresh
// Ed25519 key at start and a leaf certificate for it, signed by that CA,
// with its node name as common name, valid for CertValidity and renewed at
// half of it. Both ends check that the other's chain ends at the cluster's
// CA (crypto/x509, without a host name check: every member is as trusted
// as any other, and the name only says who is calling). A node with
// another key, a client without a certificate, and anything that is not
// TLS are refused by the handshake, before a frame is read. Instead of a
// key, certificate files can be given (CertFile, KeyFile, CAFile).
//
// # Frames
//
// One connection per direction of a pair: the dialing side sends
// requests, one-way batches and streams, the accepting side answers. A
// frame is a length, a version byte, a type and an id (frame.go); its size
// is bounded by MaxFrame, checked before the body is read. A frame that
// cannot be read (an unknown version or type, a malformed body, one over
// the size, one the side it arrived on must not receive) closes the
// connection, is counted and is logged, rate-limited. A well-formed
// request this node cannot run (an unknown message name, a payload that
// does not decode) is answered with a refusal (ErrRefused) and the
// connection stays up: in a rolling upgrade, a peer may know a message
// this node does not know yet. A handler refuses the same way by returning a
// *RefusedError (a forwarded request of a kind this node does not run).
//
// # Delivery
//
// Call is at most once per attempt, like any RPC, but unlike protoactor's
// remote it says which: ErrUnavailable means nothing was sent, and
// ErrConnLost means the request may have run. The caller retries with the
// same request id, which the handler gets, so a retry is never applied
// twice. The caller's deadline travels as the time left, and a caller that
// stops waiting tells the peer, whose handler's context ends. Send is
// best effort and never blocks: batches arrive in order or are dropped
// and counted, which is what Raft expects of its transport. A broken
// connection is dialed again by the next call; a failed dial is retried
// after a backoff that doubles from 50 ms to 2 s, and calls within the
// backoff fail at once.
package peer
