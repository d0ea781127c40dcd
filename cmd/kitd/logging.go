package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kitd/kitd/http/api"
)

// Logging (docs/decisions.md "Logs"): slog, JSON or text, one line per
// request at info. The line of a request is written on its goroutine, so
// the log goes through a buffer that a timer flushes: a request pays for a
// copy into memory, not a write(2).

// logFlushEvery bounds what a crash can lose of the log: the lines of the
// last logFlushEvery (and at most logBufferSize bytes, which are written
// as soon as they fill). A clean stop and a fatal storage error flush
// first.
const (
	logFlushEvery = 100 * time.Millisecond
	logBufferSize = 64 << 10
)

// newLogger builds the process's logger for the --log-level and
// --log-format flags, writing to w through a flushWriter, with every line
// naming node.
func newLogger(w io.Writer, level, format, node string) (*slog.Logger, *flushWriter, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	fw := newFlushWriter(w, logBufferSize, logFlushEvery)
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(fw, opts)
	case "text":
		h = slog.NewTextHandler(fw, opts)
	default:
		fw.Close()
		return nil, nil, fmt.Errorf("--log-format: %q is neither json nor text", format)
	}
	return slog.New(h).With("node", node), fw, nil
}

// defaultLogFormat is --log-format's default: text for a person reading
// a terminal, JSON for whatever collects the log otherwise. A character
// device stands for a terminal (golang.org/x/term is not a dependency);
// /dev/null is one too, and gets text nobody reads.
func defaultLogFormat(f *os.File) string {
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return "text"
	}
	return "json"
}

// requestLog is the front end's writer of request lines, on the logger's
// writer and in its format (api.RequestLog); nil when the level drops
// info lines, and with them request lines.
func requestLog(l *slog.Logger, w io.Writer, format, node string) (*api.RequestLog, error) {
	if !l.Enabled(context.Background(), slog.LevelInfo) {
		return nil, nil
	}
	return api.NewRequestLog(w, format, node)
}

// flushWriter buffers writes and flushes them every interval.
type flushWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

func newFlushWriter(w io.Writer, size int, every time.Duration) *flushWriter {
	f := &flushWriter{w: bufio.NewWriterSize(w, size), stop: make(chan struct{}), done: make(chan struct{})}
	go f.flushLoop(every)
	return f
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Write(p)
}

// Flush writes out what is buffered.
func (f *flushWriter) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Flush()
}

func (f *flushWriter) flushLoop(every time.Duration) {
	defer close(f.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.Flush()
		case <-f.stop:
			return
		}
	}
}

// Close stops the timer and flushes. Writes after it still land in the
// buffer but are flushed only by another Flush.
func (f *flushWriter) Close() error {
	close(f.stop)
	<-f.done
	return f.Flush()
}
