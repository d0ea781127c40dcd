package partition

import (
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
