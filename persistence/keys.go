package persistence

import "encoding/binary"

// AppendUint64 appends v to dst in big-endian order, so that byte-wise key
// order (Pebble's order) equals numeric order.
func AppendUint64(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, i.e. the exclusive upper bound for scanning or deleting that prefix.
// It returns nil when no such key exists (prefix empty or all 0xff), which
// Scan treats as "no upper bound". prefix is not modified.
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
