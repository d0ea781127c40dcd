package peer

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/kitd/kitd/internal/logbuf"
	"github.com/kitd/kitd/proto/kitpb"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// testRegistry holds the messages the tests send: kitd's own types.
func testRegistry() *Registry {
	return NewRegistry(&kitpb.GetUser{}, &kitpb.UserReply{}, &kitpb.Ok{}, &kitpb.CreateWorkspace{}, &kitpb.WorkspaceReply{})
}

// node is a transport under test with its log.
type node struct {
	*Transport
	log *logbuf.Buffer
}

// echo answers GetUser with a UserReply naming the caller, the request id
// and the user asked for.
func echo(_ context.Context, from string, msg proto.Message, requestID string) (proto.Message, error) {
	switch m := msg.(type) {
	case *kitpb.GetUser:
		return &kitpb.UserReply{User: &kitpb.User{Id: m.UserId, DisplayName: from + "/" + requestID}}, nil
	}
	return &kitpb.Ok{}, nil
}

// start starts a transport named name on a loopback port; edit changes its
// config first.
func start(t testing.TB, name string, edit func(*Config)) *node {
	t.Helper()
	logs := &logbuf.Buffer{}
	cfg := Config{
		NodeName:   name,
		ListenAddr: "127.0.0.1:0",
		ClusterKey: testKey,
		Registry:   testRegistry(),
		Handler:    echo,
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatalf("listen %s: %v", name, err)
	}
	t.Cleanup(func() { tr.Close() })
	return &node{Transport: tr, log: logs}
}

// ctxFor is a context for one step of a test: generous, since the machine
// may be busy.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustCall calls GetUser{userID} on addr and checks the echo.
func mustCall(t testing.TB, from *node, addr, wantFrom, userID string) {
	t.Helper()
	res, err := from.Call(ctxFor(t), addr, &kitpb.GetUser{UserId: userID}, "rid-"+userID)
	if err != nil {
		t.Fatalf("call %s: %v", addr, err)
	}
	u := res.(*kitpb.UserReply).GetUser()
	if u.GetId() != userID || u.GetDisplayName() != wantFrom+"/rid-"+userID {
		t.Fatalf("reply %v, want id %s from %s", u, userID, wantFrom)
	}
}

// readAll drains c until it is closed or fails, and reports how.
func readAll(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return err
}
