package peer

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/kitd/kitd/internal/loglimit"
)

// FuzzFrame feeds arbitrary bytes to the frame reader and every body
// decoder, on both sides of a connection: none may panic, read past a
// frame, or accept a frame over the maximum size; a request it accepts
// encodes back to the same bytes. The seed corpus (testdata/fuzz/FuzzFrame)
// holds one valid frame of each type and the refused shapes of
// TestProtocolViolationsCloseTheConnection.
func FuzzFrame(f *testing.F) {
	for _, seed := range seedFrames() {
		f.Add(seed)
	}
	const max = 1 << 16
	tr := &Transport{cfg: Config{Registry: testRegistry(), MaxFrame: max}}
	tr.log = loglimit.New(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	c := &conn{t: tr, peer: "fuzz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := &frameReader{r: bufio.NewReader(bytes.NewReader(data)), max: max}
		for {
			fr, err := rd.next()
			if err != nil {
				return
			}
			if len(fr.body) > max {
				t.Fatalf("a body of %d bytes passed a maximum of %d", len(fr.body), max)
			}
			switch fr.typ {
			case frameRequest:
				if req, err := parseRequest(fr.body); err == nil {
					again := appendRequest(nil, req.timeout, string(req.id), string(req.name))
					again = append(again, req.payload...)
					if !bytes.Equal(again, fr.body) {
						t.Fatalf("request %x encodes back as %x", fr.body, again)
					}
				}
			case frameBatch:
				parseBatch(fr.body)
			case frameStreamAbort:
				parseReason(fr.body)
			case frameCredit:
				parseCredit(fr.body)
			case frameReply:
				if len(fr.body) > 0 {
					c.decodeReply(fr.body)
				}
			}
		}
	})
}

// seedFrames is one valid frame of each type, and some that are refused.
func seedFrames() [][]byte {
	batch := appendBatch(nil, [][]byte{[]byte("raft"), nil, []byte("entries")})
	okReply := appendString([]byte{replyOK}, "kit.v1.Ok")
	return [][]byte{
		requestFrame(),
		frameBytes(frameCancel, 1, nil),
		frameBytes(frameBatch, 0, batch),
		frameBytes(frameStreamOpen, 2, []byte("partition 7")),
		frameBytes(frameChunk, 2, []byte("chunk")),
		frameBytes(frameStreamEnd, 2, nil),
		frameBytes(frameReply, 1, okReply),
		frameBytes(frameReply, 1, []byte{replyFailure, 0x0a, 0x03, 'b', 'a', 'd'}),
		frameBytes(frameReply, 1, append([]byte{replyRefused}, "unknown message type"...)),
		frameBytes(frameCredit, 2, appendUint32(nil, 8)),
		frameBytes(frameStreamDone, 2, nil),
		frameBytes(frameStreamAbort, 2, []byte("disk full")),
		frameBytes(99, 1, nil),
		{0, 0, 0, 3, wireVersion, byte(frameRequest), 0},
		{0xff, 0xff, 0xff, 0xff, wireVersion},
		append(requestFrame(), frameBytes(frameBatch, 0, []byte{5, 1, 'x'})...),
	}
}
