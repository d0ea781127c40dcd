package raftnet

import "sync"

// Directory says where a raft node listens: its peer transport's address.
// The cluster feeds it from gossip membership; a node it does not know is
// unreachable, and messages to it are dropped and counted.
type Directory interface {
	Addr(nodeID uint64) (addr string, ok bool)
}

// StaticDirectory is a Directory kept by hand (tests, fixed clusters). It
// is safe for concurrent use.
type StaticDirectory struct {
	mu    sync.RWMutex
	addrs map[uint64]string
}

// NewStaticDirectory returns a directory holding a copy of addrs.
func NewStaticDirectory(addrs map[uint64]string) *StaticDirectory {
	d := &StaticDirectory{addrs: make(map[uint64]string, len(addrs))}
	for id, a := range addrs {
		d.addrs[id] = a
	}
	return d
}

// Addr returns the address of node id.
func (d *StaticDirectory) Addr(id uint64) (string, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	a, ok := d.addrs[id]
	return a, ok
}

// Set records where node id listens.
func (d *StaticDirectory) Set(id uint64, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs[id] = addr
}

// Remove forgets node id: messages to it are dropped from now on.
func (d *StaticDirectory) Remove(id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.addrs, id)
}
