package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/proto/kitpb"
)

// member dials b with a member's certificate, for writing raw frames.
func member(t *testing.T, b *node) *tls.Conn {
	t.Helper()
	a := start(t, "a", nil)
	c, err := tls.Dial("tcp", b.Addr(), a.id.clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func frameBytes(typ frameType, id uint64, body []byte) []byte {
	b := appendHeader(nil, typ, id)
	b = append(b, body...)
	finishFrame(b, 0, 1<<30)
	return b
}

// TestProtocolViolationsCloseTheConnection: a member that sends a frame
// the receiver cannot read loses its connection, is counted and logged,
// and nothing runs.
func TestProtocolViolationsCloseTheConnection(t *testing.T) {
	withVersion := func(v byte) []byte {
		b := requestFrame()
		b[4] = v
		return b
	}
	overMax := binary.BigEndian.AppendUint32(nil, 64<<10+1)
	overMax = append(overMax, wireVersion, byte(frameRequest))
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"a wrong version", withVersion(2)},
		{"an unknown frame type", frameBytes(99, 1, nil)},
		{"a frame over the maximum size, refused before its body", overMax},
		{"a frame shorter than its header", []byte{0, 0, 0, 3, wireVersion, byte(frameRequest), 0}},
		{"a reply sent to the accepting side", frameBytes(frameReply, 1, []byte{replyOK, 0})},
		{"a request body cut short", frameBytes(frameRequest, 1, []byte{0, 0, 0})},
		{"a request whose name runs past the frame", frameBytes(frameRequest, 1, append(make([]byte, 8), 1, 200, 'x'))},
		{"a batch that claims more payloads than it holds", frameBytes(frameBatch, 0, []byte{5, 1, 'x'})},
		{"an abort reason over its maximum", frameBytes(frameStreamAbort, 1, bytes.Repeat([]byte{'r'}, maxReason+1))},
		{"a request id used twice at once", append(requestFrameFor("block"), requestFrameFor("block")...)},
		{"chunks past the credit granted", pastCredit()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			b := start(t, "b", func(c *Config) {
				c.MaxFrame = 64 << 10
				c.Handler = func(ctx context.Context, from string, msg proto.Message, id string) (proto.Message, error) {
					if msg.(*kitpb.GetUser).GetUserId() == "block" {
						<-ctx.Done()
						return nil, nil
					}
					ran.Add(1)
					return echo(ctx, from, msg, id)
				}
				c.Stream = func(ctx context.Context, _ string, _ []byte, _ *StreamReader) error {
					<-ctx.Done()
					return nil
				}
			})
			c := member(t, b)
			c.Write(tt.bytes)
			if err := readAll(c); err != nil && !isReset(err) {
				t.Fatalf("the connection was not closed: %v", err)
			}
			if ran.Load() != 0 {
				t.Fatal("a request ran")
			}
			if b.Stats().Refused == 0 || !strings.Contains(b.log.String(), "connection closed") {
				t.Fatalf("not counted or not logged: %d, %q", b.Stats().Refused, b.log.String())
			}
		})
	}
}

// pastCredit opens a stream and sends one chunk more than the default
// window, to a reader that reads none.
func pastCredit() []byte {
	b := frameBytes(frameStreamOpen, 1, nil)
	for range 9 {
		b = append(b, frameBytes(frameChunk, 1, []byte("chunk"))...)
	}
	return b
}

func requestFrameFor(user string) []byte {
	b := appendHeader(nil, frameRequest, 1)
	b = appendRequest(b, 0, "r", "kit.v1.GetUser")
	b, _ = proto.MarshalOptions{}.MarshalAppend(b, &kitpb.GetUser{UserId: user})
	finishFrame(b, 0, 1<<20)
	return b
}

// TestGarbageChangesNothing: random bytes from members and strangers, on
// many connections, run nothing and break nothing (a panic would end the
// test binary).
func TestGarbageChangesNothing(t *testing.T) {
	var ran atomic.Int32
	b := start(t, "b", func(c *Config) { c.Handler = counting(&ran); c.OneWay = func(string, [][]byte) { ran.Add(1) } })
	a := start(t, "a", nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		junk := make([]byte, rng.IntN(4096))
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		if i%2 == 0 {
			// Valid-looking headers with random types and bodies.
			binary.BigEndian.PutUint32(junk, uint32(len(junk)-4))
			junk[4] = wireVersion
		}
		var c net.Conn
		var err error
		if i%4 < 2 {
			c, err = tls.Dial("tcp", b.Addr(), a.id.clientConfig())
		} else {
			c, err = net.Dial("tcp", b.Addr())
		}
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.Close()
	}
	mustCall(t, a, b.Addr(), "a", "after")
	if n := ran.Load(); n != 1 {
		t.Fatalf("%d requests or batches ran, want the member's one call", n)
	}
}

// TestGarbageAnswerFailsTheCall: a peer (with a member's certificate) that
// answers nonsense fails the caller's call; it does not crash the caller.
func TestGarbageAnswerFailsTheCall(t *testing.T) {
	for _, answer := range [][]byte{
		frameBytes(frameRequest, 1, nil),                         // a request sent to the dialing side
		frameBytes(frameReply, 1, []byte{9}),                     // an unknown reply kind
		frameBytes(frameReply, 1, []byte{replyFailure, 0xff}),    // a failure that does not decode
		frameBytes(frameReply, 1, []byte{replyOK, 50, 'x'}),      // a name past the end
		frameBytes(frameCredit, 1, []byte{1}),                    // a credit of the wrong size
		{0, 0, 0, 20, wireVersion, byte(frameReply), 0, 0, 0, 0}, // cut short by a close
	} {
		a := start(t, "a", nil)
		fake := start(t, "fake", nil) // for its certificate only
		ln, err := tls.Listen("tcp", "127.0.0.1:0", fake.id.serverConfig())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.Read(make([]byte, 1024))
			c.Write(answer)
		}()
		_, err = a.Call(ctxFor(t), ln.Addr().String(), &kitpb.GetUser{}, "r")
		ln.Close()
		if !errors.Is(err, ErrConnLost) {
			t.Fatalf("answer %x: got %v, want ErrConnLost", answer, err)
		}
	}
}
