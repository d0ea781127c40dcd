package actors

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// Rate buckets live in the actor that counts them: they are in memory only,
// and a passivated actor's buckets restart full (docs/architecture.md
// "Actor lifetime").

// bucketSet keeps the buckets of one actor by name and key.
type bucketSet struct {
	table   limits.Table
	buckets map[string]*limits.Bucket
}

// take spends one token of the named bucket for key. With limits off it
// always allows and returns a zero decision.
func (s *bucketSet) take(name limits.Name, key string, now time.Time) (limits.Decision, bool) {
	if s.table == nil {
		return limits.Decision{OK: true}, false
	}
	r, ok := s.table[name]
	if !ok {
		return limits.Decision{OK: true}, false
	}
	if s.buckets == nil {
		s.buckets = make(map[string]*limits.Bucket)
	}
	k := bucketKey(name, key)
	b := s.buckets[k]
	if b == nil {
		nb := limits.NewBucket(r, now)
		b = &nb
		s.buckets[k] = b
	}
	return b.Take(r, now), true
}

// giveBack returns the token a granted take of the named bucket for key
// took (limits.Bucket.Return). A bucket that is not kept is full: there is
// nothing to give back to.
func (s *bucketSet) giveBack(name limits.Name, key string, now time.Time) {
	r, ok := s.table[name]
	if !ok {
		return
	}
	if b := s.buckets[bucketKey(name, key)]; b != nil {
		b.Return(r, now)
	}
}

// answer replies to TakeToken and ReturnToken, the requests every actor
// that keeps buckets takes alike; ok is false for any other message.
func (s *bucketSet) answer(msg proto.Message, clk clock.Clock) (reply proto.Message, ok bool) {
	switch m := msg.(type) {
	case *kitpb.TakeToken:
		d, _ := s.take(limits.Name(m.Bucket), m.Key, clk.Now())
		return d.Wire(), true
	case *kitpb.ReturnToken:
		s.giveBack(limits.Name(m.Bucket), m.Key, clk.Now())
		return &kitpb.Ok{}, true
	}
	return nil, false
}

func bucketKey(name limits.Name, key string) string { return string(name) + "\x00" + key }
