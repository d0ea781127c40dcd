package multiraft

import (
	"bytes"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   []byte
		g     GroupID
		kind  keyKind
		index uint64
	}{
		{"hard state of group 7", hardStateKey(7), 7, kindHardState, 0},
		{"conf state of group 0", confStateKey(0), 0, kindConfState, 0},
		{"applied index of group 65535", appliedKey(65535), 65535, kindApplied, 0},
		{"snapshot mark of group 300", snapshotKey(300), 300, kindSnapshot, 0},
		{"log entry 1 of group 1", appendLogKey(nil, 1, 1), 1, kindLog, 1},
		{"log entry max of group 2", appendLogKey(nil, 2, 1<<63), 2, kindLog, 1 << 63},
		{"a key outside r/ is unknown", []byte("p/\x00\x01/x"), 0, kindUnknown, 0},
		{"an unknown suffix is unknown", []byte("r/\x00\x01/zz"), 1, kindUnknown, 0},
		{"a short log key is unknown", []byte("r/\x00\x01/log/\x01"), 1, kindUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, kind, index := decodeKey(tc.key)
			if g != tc.g || kind != tc.kind || index != tc.index {
				t.Fatalf("decodeKey(%q) = %d, %d, %d; want %d, %d, %d", tc.key, g, kind, index, tc.g, tc.kind, tc.index)
			}
		})
	}

	t.Run("log keys sort by index, inside the group's range", func(t *testing.T) {
		lower, upper := groupKeys(3)
		prev := lower
		for _, i := range []uint64{0, 1, 255, 256, 1 << 40} {
			k := appendLogKey(nil, 3, i)
			if bytes.Compare(prev, k) >= 0 || bytes.Compare(k, upper) >= 0 {
				t.Fatalf("key of index %d out of order or range", i)
			}
			prev = k
		}
	})
	for _, tc := range []struct {
		name  string
		key   []byte
		local bool
	}{
		{"a hard state stays on its node", hardStateKey(7), true},
		{"a log entry stays on its node", appendLogKey(nil, 2, 9), true},
		{"the raft id stays on its node", nodeIDKey(), true},
		{"the forgotten mark stays on its node", forgottenKey(), true},
		{"a partition's record travels", []byte("p/\x00\x01/ws/x"), false},
		{"the data layout travels", []byte("meta/layout"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if NodeLocal(tc.key) != tc.local {
				t.Fatalf("NodeLocal(%q) = %v", tc.key, !tc.local)
			}
		})
	}
	t.Run("every group is inside the root range", func(t *testing.T) {
		lower, upper := rootKeys()
		for _, g := range []GroupID{0, 1, 65535} {
			gl, gu := groupKeys(g)
			if bytes.Compare(gl, lower) < 0 || bytes.Compare(gu, upper) > 0 {
				t.Fatalf("group %d outside r/", g)
			}
		}
	})
}
