package membership

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// Config is what Start needs. server/clusternode fills it from the flags of
// OPERATIONS.md sections 1 and 7.
type Config struct {
	// NodeName names the node for its whole life, across restarts
	// (--node-name). Unique in the cluster.
	NodeName string
	// BindAddr is the gossip address, host:port, UDP and TCP
	// (--cluster-bind). Port 0 picks a free port (Addr tells which): tests
	// use it, so that no port is guessed and none is raced for.
	BindAddr string
	// AdvertiseAddr is the address others reach BindAddr by, when it
	// differs (a bind on 0.0.0.0, NAT). Empty: memberlist's choice.
	AdvertiseAddr string
	// Join lists seed members, host:port (--join). A seed equal to this
	// node's own address is skipped.
	Join []string
	// ClusterKey is the shared secret of --cluster-key. Gossip is
	// encrypted (AES-256-GCM) with a key derived from it (gossipKey).
	// Empty means plaintext gossip, which Start allows on a loopback bind
	// only.
	ClusterKey string
	// Meta is published at Start; its SystemID is replaced by a fresh one.
	Meta Meta
	// Timing of the failure detector; zero picks LocalTiming for a
	// loopback bind and LANTiming otherwise.
	Timing Timing
	// Logger is used as given: the node's own attributes (its name) are
	// the caller's to add, once (docs/decisions.md "Logs").
	Logger *slog.Logger
}

// Timing sets how fast memberlist notices a change, and what it costs in
// packets and false alarms.
type Timing struct {
	// ProbeInterval: each node probes one member per interval, so a dead
	// node is first probed within (members-1) intervals.
	ProbeInterval time.Duration
	// ProbeTimeout: the wait for an ack before asking others to probe.
	ProbeTimeout time.Duration
	// SuspicionMult: a suspect gets SuspicionMult * max(1, log10(n)) *
	// ProbeInterval to refute before it is declared dead.
	SuspicionMult int
	// GossipInterval: how often changes are sent to a few random members.
	GossipInterval time.Duration
	// PushPullInterval: how often full state is exchanged with one member
	// (anti-entropy: it repairs what gossip lost).
	PushPullInterval time.Duration
	// TCPTimeout bounds a push/pull or a join.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime: how long after a node was declared dead its
	// name may come back from another address. Until then a second
	// process under the same name is refused (a conflict), so a false
	// death cannot make two lives of one name flap.
	DeadNodeReclaimTime time.Duration
}

// LocalTiming is for clusters on one machine (tests, make cluster). With
// it a kill -9 is seen by the others in about 1 s (docs/decisions.md
// "Cluster membership", timing), at the price of false suspicions
// on pauses over about 0.5 s: harmless for a routing hint.
func LocalTiming() Timing {
	return Timing{
		ProbeInterval:       200 * time.Millisecond,
		ProbeTimeout:        100 * time.Millisecond,
		SuspicionMult:       2,
		GossipInterval:      50 * time.Millisecond,
		PushPullInterval:    5 * time.Second, // loopback TCP is cheap
		TCPTimeout:          time.Second,
		DeadNodeReclaimTime: 500 * time.Millisecond, // 10 gossip intervals: the death has spread
	}
}

// LANTiming is memberlist's DefaultLANConfig (a kill -9 is seen in about
// 6 s with 3 nodes, 7 s with 5), which rides out GC and scheduling pauses
// of a busy machine.
func LANTiming() Timing {
	return Timing{
		ProbeInterval:       time.Second,
		ProbeTimeout:        500 * time.Millisecond,
		SuspicionMult:       4,
		GossipInterval:      200 * time.Millisecond,
		PushPullInterval:    30 * time.Second,
		TCPTimeout:          10 * time.Second,
		DeadNodeReclaimTime: 5 * time.Second, // 25 gossip intervals
	}
}

// Errors of Start.
var (
	// ErrConfig: a Config field is missing or malformed.
	ErrConfig = errors.New("membership: invalid config")
	// ErrKeyRequired: plaintext gossip was asked for on an address other
	// machines can reach.
	ErrKeyRequired = errors.New("membership: a cluster key is required to bind gossip beyond loopback")
)

// maxNodeName keeps names, which ride in every gossip message, short.
const maxNodeName = 128

// gossipKeyInfo binds the derived key to its one use: the same
// --cluster-key will also derive the node-to-node TLS identity, with
// another info string, and the two keys must differ.
const gossipKeyInfo = "kitd cluster gossip key v1"

// gossipKey derives memberlist's AES-256 key from the cluster secret with
// HKDF-SHA256 (RFC 5869, no salt: the secret is the only input both nodes
// share). A secret of any length gives a key of the right size, and the
// secret itself never reaches the wire or memberlist.
func gossipKey(secret string) ([]byte, error) {
	return hkdf.Key(sha256.New, []byte(secret), nil, gossipKeyInfo, 32)
}

// bind is a parsed BindAddr.
type bind struct {
	host string
	port int
}

func (c *Config) check() (bind, error) {
	if c.NodeName == "" || len(c.NodeName) > maxNodeName {
		return bind{}, fmt.Errorf("%w: NodeName must have 1 to %d bytes", ErrConfig, maxNodeName)
	}
	host, p, err := splitHostPort(c.BindAddr)
	if err != nil {
		return bind{}, fmt.Errorf("%w: BindAddr: %v", ErrConfig, err)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		// memberlist binds IPs only; a name would bind whatever it
		// resolves to today.
		return bind{}, fmt.Errorf("%w: BindAddr: host must be an IP address", ErrConfig)
	}
	if c.ClusterKey == "" && !isLoopback(host) {
		return bind{}, ErrKeyRequired
	}
	if c.AdvertiseAddr != "" {
		if _, p, err := splitHostPort(c.AdvertiseAddr); err != nil || p == 0 {
			return bind{}, fmt.Errorf("%w: AdvertiseAddr must be host:port with a port", ErrConfig)
		}
	}
	for i, s := range c.Join {
		if _, p, err := splitHostPort(s); err != nil || p == 0 {
			return bind{}, fmt.Errorf("%w: Join[%d] must be host:port with a port", ErrConfig, i)
		}
	}
	return bind{host: host, port: p}, nil
}

// timing is c.Timing, or the profile for a bind on host when it is zero.
func (c *Config) timing(host string) Timing {
	switch {
	case c.Timing != (Timing{}):
		return c.Timing
	case isLoopback(host):
		return LocalTiming()
	}
	return LANTiming()
}

// splitHostPort splits host:port with a numeric port (0 included).
func splitHostPort(s string) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, errors.New("port must be 0 to 65535")
	}
	return host, p, nil
}

func isLoopback(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
