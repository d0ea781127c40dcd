// Package logbuf is a log for tests: a buffer that the goroutines writing
// a log and the test reading it may share.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it; it is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
