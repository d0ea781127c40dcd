package partition

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/ids"
)

func TestPartitionRules(t *testing.T) {
	const conv = "0193a4b2-6c00-7abc-8def-0123456789ab"
	hash := sha256.Sum256([]byte("kbt_secret"))
	for _, tc := range []struct {
		rule string
		got  ID
		want ID
	}{
		// Stored keys depend on it: the value is pinned.
		{"an identity's partition is its tag mod Count", Of(conv), ID(0x03a1f551 % Count)},
		{"a message id names its conversation's partition", OfTag(mustTag(t, ids.NewMessage(time.Unix(1700000000, 0), ids.MessageTag(conv), 1))), Of(conv)},
		{"a hash's partition is its first four bytes mod Count", OfHash(hash[:]), ID((uint32(hash[0])<<24 | uint32(hash[1])<<16 | uint32(hash[2])<<8 | uint32(hash[3])) % Count)},
		{"the largest tag stays in range", OfTag(0xffffffff), Count - 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.rule, tc.got, tc.want)
		}
	}
}

// Identities spread over every partition: no partition is left without
// work, none holds several times its share.
func TestIdentitiesSpreadOverEveryPartition(t *testing.T) {
	const n = Count * 200
	var seen [Count]int
	for range n {
		seen[Of(ids.New())]++
	}
	for p, c := range seen {
		if c < n/Count/3 || c > n/Count*3 {
			t.Errorf("partition %d holds %d of %d identities", p, c, n)
		}
	}
}

func mustTag(t *testing.T, id string) uint32 {
	t.Helper()
	tag, _, ok := ids.ParseMessage(id)
	if !ok {
		t.Fatalf("ParseMessage(%q) not ok", id)
	}
	return tag
}

func TestKeyRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		in   ID
		ok   bool
	}{
		{"a key of partition 5 is in its range", append(AppendKeyPrefix(nil, 5), "msg/c/1"...), 5, true},
		{"the prefix alone is in the range", AppendKeyPrefix(nil, 63), 63, true},
		{"a key of the node itself is in no partition", []byte("meta/layout"), 0, false},
		{"raft's keys are in no partition", []byte("r/\x00\x05/hs"), 0, false},
		{"a partition beyond Count is none", AppendKeyPrefix(nil, Count), 0, false},
		{"a key shorter than the prefix is none", []byte("p/\x00"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := OfKey(tc.key)
			if ok != tc.ok || ok && p != tc.in {
				t.Fatalf("OfKey = %d, %v; want %d, %v", p, ok, tc.in, tc.ok)
			}
			if !ok {
				return
			}
			lower, upper := KeyRange(p)
			if bytes.Compare(tc.key, lower) < 0 || bytes.Compare(tc.key, upper) >= 0 {
				t.Fatalf("%q outside [%q, %q)", tc.key, lower, upper)
			}
			if _, nextUpper := KeyRange(p + 1); p+1 < Count && bytes.Compare(upper, nextUpper) >= 0 {
				t.Fatalf("range of %d overlaps the next", p)
			}
		})
	}
}
