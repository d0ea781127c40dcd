package jepsen

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy is a loopback TCP proxy that stands between a client (or a node)
// and one node, and can fail the link as a network would:
//
//   - Partition: nothing crosses in either direction. Connections stay
//     open and new ones are accepted, but no byte is forwarded and no new
//     connection reaches the node; what was sent waits, as TCP would
//     retransmit it, and flows on after Heal. This is a cut cable or a
//     dropping firewall, not a refusal. Given source hosts, it holds only
//     the connections that come from them: the link between one node and
//     the one behind the proxy, when every node has an address of its own.
//   - Cut: every connection is closed at once and new ones are closed as
//     soon as they are accepted (a reset), until Heal.
//
// The address a client dials never changes, so a node restarted on
// another port stays at the same address: SetUpstream moves it.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	mode     mode
	from     map[string]bool // the source hosts a partition holds; empty: all
	changed  chan struct{}   // closed (and replaced) when the mode changes
	conns    map[net.Conn]struct{}
	passed   map[string]int64 // bytes forwarded, by the client's host
	closed   bool
	wg       sync.WaitGroup
}

type mode int

const (
	passing mode = iota
	partitioned
	cut
)

// NewProxy listens on a fresh loopback port and forwards to upstream
// (host:port).
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, changed: make(chan struct{}), conns: make(map[net.Conn]struct{}), passed: make(map[string]int64)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's own address (host:port), the one clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream sends new connections to addr; open ones keep their node.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = addr
}

// Passed counts the bytes the proxy forwarded, both ways, by the host
// the connection came from: what a test reads to see which links a
// partition left open.
func (p *Proxy) Passed() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.passed))
	for h, n := range p.passed {
		out[h] = n
	}
	return out
}

// Partition stops all traffic, both ways, until Heal; with source hosts
// (IP addresses), only the traffic of connections that come from them.
func (p *Proxy) Partition(from ...string) {
	set := make(map[string]bool, len(from))
	for _, h := range from {
		set[h] = true
	}
	p.set(partitioned, set)
}

// Cut closes every connection and refuses new ones until Heal.
func (p *Proxy) Cut() { p.set(cut, nil) }

// Heal lets traffic pass again; what a partition held is delivered.
func (p *Proxy) Heal() { p.set(passing, nil) }

func (p *Proxy) set(m mode, from map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.from = m, from
	close(p.changed)
	p.changed = make(chan struct{})
	if m == cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	// Wake the copiers waiting for Heal: their connections are closed.
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c so that Cut and Close can close it; it reports false
// (and closes c) when the proxy is cut or closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == cut {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// gate returns once the traffic of a connection from host src may pass,
// or false when the proxy closed.
func (p *Proxy) gate(src string) bool {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return false
		}
		if !p.holds(src) {
			p.mu.Unlock()
			return true
		}
		changed := p.changed
		p.mu.Unlock()
		<-changed
	}
}

// holds reports whether a partition holds the connections from host src;
// p.mu is held.
func (p *Proxy) holds(src string) bool {
	return p.mode == partitioned && (len(p.from) == 0 || p.from[src])
}

// hostOf is the IP address of a connection's far end.
func hostOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one client connection. A partition holds the dial too:
// the node hears of the connection only after Heal.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	src := hostOf(c)
	if !p.gate(src) {
		return
	}
	p.mu.Lock()
	upstream := p.upstream
	p.mu.Unlock()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return // the node is down: the client sees its connection closed
	}
	if !p.track(u) {
		return
	}
	defer p.untrack(u)
	clean := make(chan bool, 2)
	go func() { clean <- p.copy(u, c, src) }()
	go func() { clean <- p.copy(c, u, src) }()
	if !<-clean {
		// A broken side ends both, so that the other copier returns; a
		// half-close lets the other direction finish its answer.
		c.Close()
		u.Close()
	}
	<-clean
}

// copy forwards src to dst, a read at a time, holding each read (and the
// end of the stream) while a partition holds the connections from host.
// It reports whether src ended cleanly, which it passes on as a
// half-close.
func (p *Proxy) copy(dst, src net.Conn, host string) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(host) {
				return false
			}
			// Counted before the write, so that a reader that has the
			// bytes finds them counted.
			p.mu.Lock()
			p.passed[host] += int64(n)
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) || !p.gate(host) {
				return false
			}
			return dst.(*net.TCPConn).CloseWrite() == nil
		}
	}
}
