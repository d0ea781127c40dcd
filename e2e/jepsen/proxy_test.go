package jepsen

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer answers every line with its name and the line.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newEchoServer(t *testing.T, name string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

// quiet is how long a test waits to see that nothing arrives. A busy
// machine can only make such a check pass wrongly, never fail wrongly.
const quiet = 200 * time.Millisecond

type line struct {
	c *net.TCPConn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *line {
	t.Helper()
	return dialFrom(t, p, "127.0.0.1")
}

// dialFrom connects from the loopback address host (127.0.0.0/8 is all
// loopback on Linux).
func dialFrom(t *testing.T, p *Proxy, host string) *line {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}
	c, err := d.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &line{c: c.(*net.TCPConn), r: bufio.NewReader(c)}
}

func (l *line) send(t *testing.T, s string) {
	t.Helper()
	if _, err := l.c.Write([]byte(s + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// recv reads one line, waiting at most d.
func (l *line) recv(d time.Duration) (string, error) {
	_ = l.c.SetReadDeadline(time.Now().Add(d))
	s, err := l.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func (l *line) want(t *testing.T, s string) {
	t.Helper()
	got, err := l.recv(10 * time.Second)
	if err != nil || got != s {
		t.Fatalf("got %q, %v; want %q", got, err, s)
	}
}

func (l *line) wantNothing(t *testing.T) {
	t.Helper()
	if got, err := l.recv(quiet); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %q, %v; want nothing to arrive", got, err)
	}
}

func (l *line) wantClosed(t *testing.T) {
	t.Helper()
	if got, err := l.recv(10 * time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %q, %v; want the connection closed", got, err)
	}
}

func TestProxy(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, p *Proxy, a, b *echoServer)
	}{
		{"a passing proxy forwards both ways", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			l := dial(t, p)
			l.send(t, "ping")
			l.want(t, "a:ping")
		}},
		{"a partition holds an open connection's bytes until heal, then delivers them", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			l := dial(t, p)
			l.send(t, "before")
			l.want(t, "a:before")
			p.Partition()
			l.send(t, "held")
			l.wantNothing(t)
			p.Heal()
			l.want(t, "a:held")
		}},
		{"a partition keeps new connections from reaching the node until heal", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			p.Partition()
			l := dial(t, p)
			l.send(t, "knock")
			l.wantNothing(t)
			if n := a.accepted.Load(); n != 0 {
				t.Fatalf("the node accepted %d connections through a partition", n)
			}
			p.Heal()
			l.want(t, "a:knock")
		}},
		{"a partition from given hosts holds their connections and passes the others'", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			cutOff, other := dialFrom(t, p, "127.0.0.2"), dialFrom(t, p, "127.0.0.3")
			cutOff.send(t, "before")
			cutOff.want(t, "a:before")
			p.Partition("127.0.0.2")
			held := p.Passed()["127.0.0.2"]
			cutOff.send(t, "held")
			cutOff.wantNothing(t)
			other.send(t, "passes")
			other.want(t, "a:passes")
			if n := p.Passed()["127.0.0.2"]; n != held {
				t.Fatalf("%d bytes of the partitioned host passed", n-held)
			}
			if n := p.Passed()["127.0.0.3"]; n != int64(len("passes\n")+len("a:passes\n")) {
				t.Fatalf("the other host's bytes passed: %d, want both ways of one line", n)
			}
			late := dialFrom(t, p, "127.0.0.2")
			late.send(t, "knock")
			late.wantNothing(t)
			p.Heal()
			cutOff.want(t, "a:held")
			late.want(t, "a:knock")
		}},
		{"a cut closes open connections and new ones until heal", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			open := dial(t, p)
			open.send(t, "x")
			open.want(t, "a:x")
			p.Cut()
			open.wantClosed(t)
			refused := dial(t, p)
			refused.wantClosed(t)
			p.Heal()
			l := dial(t, p)
			l.send(t, "back")
			l.want(t, "a:back")
		}},
		{"a new upstream takes new connections; open ones keep their node", func(t *testing.T, p *Proxy, a, b *echoServer) {
			old := dial(t, p)
			old.send(t, "1")
			old.want(t, "a:1")
			p.SetUpstream(b.addr())
			l := dial(t, p)
			l.send(t, "2")
			l.want(t, "b:2")
			old.send(t, "3")
			old.want(t, "a:3")
		}},
		{"a node that is down closes the client's connection", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			a.ln.Close()
			l := dial(t, p)
			l.wantClosed(t)
		}},
		{"a half-close still lets the answer back", func(t *testing.T, p *Proxy, a, _ *echoServer) {
			l := dial(t, p)
			l.send(t, "last")
			if err := l.c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			l.want(t, "a:last")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newEchoServer(t, "a"), newEchoServer(t, "b")
			p, err := NewProxy(a.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			tt.run(t, p, a, b)
		})
	}
}
