package limits

import (
	"strconv"
	"time"
)

// Bucket is the state of one token bucket. It is a small value (two int64,
// no pointers) without locks: it lives inside the one actor that owns the
// counted thing, which is its only user. The zero Bucket is full.
//
// The arithmetic is exact integer arithmetic, so it never drifts: one token
// is worth Window nanosecond-units of "debt", and each elapsed nanosecond
// pays back Refill units. The bucket is full when the debt is 0 and empty
// when the debt exceeds (Capacity-1)*Window.
//
// Time going backwards grants nothing: the bucket only refills for time
// beyond the latest instant it has seen.
type Bucket struct {
	last int64 // latest instant seen, Unix nanoseconds
	debt int64 // missing tokens, in units of 1/Window token; 0 = full
}

// NewBucket returns a full bucket for r, as seen at now.
func NewBucket(r Rate, now time.Time) Bucket {
	return Bucket{last: now.UnixNano()}
}

// Decision is the outcome of one [Bucket.Take].
type Decision struct {
	OK           bool // a token was taken; false = over the limit (429)
	Remaining    int  // whole tokens left after this call
	RetryAfter   int  // when !OK: whole seconds (rounded up, at least 1) until a token is available; 0 when OK
	ResetSeconds int  // whole seconds (rounded up) until the bucket is full again
	Policy       Name // r.Name
	Rate         Rate // the rate the decision was made under
}

// refill brings the debt up to now and returns the capacity in units.
func (b *Bucket) refill(r Rate, now time.Time) (capUnits int64) {
	window, refill := int64(r.Window), int64(r.Refill)
	capUnits = int64(r.Capacity) * window
	if ns := now.UnixNano(); ns > b.last {
		dt := ns - b.last
		b.last = ns
		if b.debt > 0 {
			// dt*refill may overflow; when dt covers the whole debt the
			// bucket is simply full.
			if dt >= ceilDiv(b.debt, refill) {
				b.debt = 0
			} else {
				b.debt -= dt * refill
			}
		}
	}
	if b.debt > capUnits { // the rate shrank since the last call
		b.debt = capUnits
	}
	return capUnits
}

// Take tries to take one token at now under rate r (which must pass
// [Rate.Validate]; a rate with a non-positive field is treated as no limit
// and always allows). A refused Take takes nothing. Take does not allocate.
func (b *Bucket) Take(r Rate, now time.Time) (d Decision) {
	d.Policy, d.Rate = r.Name, r
	if r.Capacity <= 0 || r.Refill <= 0 || r.Window <= 0 {
		d.OK = true
		return d
	}
	capUnits := b.refill(r, now)
	window, refill := int64(r.Window), int64(r.Refill)
	if b.debt+window <= capUnits {
		b.debt += window
		d.OK = true
	} else {
		wait := ceilDiv(b.debt+window-capUnits, refill) // nanoseconds
		d.RetryAfter = int(max(1, ceilDiv(wait, int64(time.Second))))
	}
	d.Remaining = int((capUnits - b.debt) / window)
	d.ResetSeconds = int(ceilDiv(ceilDiv(b.debt, refill), int64(time.Second)))
	return d
}

// Return gives back at now the token a granted Take took, when the request
// it was taken for is refused by another bucket (docs/decisions.md "Rate
// limits"). A bucket that filled up meanwhile stays full, so returning
// never grants more than if the Take had not happened.
func (b *Bucket) Return(r Rate, now time.Time) {
	if r.Capacity <= 0 || r.Refill <= 0 || r.Window <= 0 {
		return
	}
	b.refill(r, now)
	b.debt = max(0, b.debt-int64(r.Window))
}

// Peek is Take without taking: its OK says whether a token is there at
// now, and a refusal carries the RetryAfter a refused Take would. b is a
// copy, so nothing changes.
func (b Bucket) Peek(r Rate, now time.Time) Decision { return b.Take(r, now) }

// Full reports whether the bucket is full at now under r, i.e. whether its
// owner may forget it (a fresh Bucket behaves the same).
func (b Bucket) Full(r Rate, now time.Time) bool {
	if r.Capacity <= 0 || r.Refill <= 0 || r.Window <= 0 {
		return true
	}
	b.refill(r, now)
	return b.debt == 0
}

// PolicyHeader renders the RateLimit-Policy header value in its structured
// field form (docs/decisions.md): q is the capacity, w is
// [Rate.PolicyWindow].
//
//	"write";q=50;w=60
func (d Decision) PolicyHeader() string {
	var buf [96]byte
	b := appendSFString(buf[:0], string(d.Policy))
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, int64(d.Rate.Capacity), 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, d.Rate.PolicyWindow(), 10)
	return string(b)
}

// LimitHeader renders the RateLimit header value in its structured field
// form (docs/decisions.md): r is the requests left, t the seconds until the
// bucket is full again.
//
//	"write";r=49;t=2
func (d Decision) LimitHeader() string {
	var buf [96]byte
	b := appendSFString(buf[:0], string(d.Policy))
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, int64(d.ResetSeconds), 10)
	return string(b)
}

// appendSFString appends s as an RFC 8941 sf-string: quoted, with '"' and
// '\' escaped and anything outside printable ASCII dropped.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}
