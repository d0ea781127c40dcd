// Package peertest helps tests of the node-to-node transport and of what
// runs over it break connections between two members.
package peertest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target and can cut them or stop
// forwarding, to break a connection between two transports.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  []net.Conn
	paused bool
	resume chan struct{}
}

// NewProxy starts a proxy to target on a loopback port; it stops with t.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, resume: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.accept()
	return p
}

// Addr is the address to dial instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst, holding still while the proxy is paused.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		p.mu.Lock()
		paused, resume := p.paused, p.resume
		p.mu.Unlock()
		if paused {
			<-resume
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// Cut closes every connection through the proxy; new ones are forwarded.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Kill closes the listener and every connection through the proxy, as a
// process that crashed: its port refuses what dials it from then on.
func (p *Proxy) Kill() {
	p.ln.Close()
	p.Cut()
}

// Reset aborts every connection through the proxy, as a process that
// exits does to what it had open: each side reads "connection reset by
// peer" rather than the end of the stream.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST
		}
		c.Close()
	}
	p.conns = nil
}

// Pause stops reading from both sides (a peer that stopped); Unpause
// resumes.
func (p *Proxy) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

// Unpause resumes forwarding after Pause.
func (p *Proxy) Unpause() {
	p.mu.Lock()
	p.paused = false
	close(p.resume)
	p.resume = make(chan struct{})
	p.mu.Unlock()
}
