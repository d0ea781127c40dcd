package api

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/kitd/kitd/internal/kiterr"
)

// GET /ops/v1/backup (OPERATIONS.md section 8): the backup is made on a
// goroutine of its own into a pipe that the response streams, so nothing
// of it is held in memory. Once its first byte is sent a failure can only
// cut the stream short; the backup's trailer is then missing, which
// restore refuses.

// BackupFunc writes a backup of everything committed before the call to
// out (persistence/backup's format); it stops when ctx ends.
type BackupFunc func(ctx context.Context, out io.Writer) error

// backupIdle is how long a backup waits for its reader (the client's
// side of the connection) before the write fails: the server's write
// timeout is for one response, and a backup may be larger than what it
// lets through.
const backupIdle = 30 * time.Second

func (s *Server) opBackup(in call) (reply, error) {
	if s.backup == nil {
		return reply{}, kiterr.New(kiterr.Unavailable, "this node makes no backups")
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	out := &firstWrite{w: pw, started: make(chan struct{})}
	done := make(chan error, 1)
	started := time.Now()
	go func() {
		err := s.backup(ctx, out)
		pw.CloseWithError(err)
		done <- err
		switch {
		case err == nil:
			s.log.Info("backup made", "seconds", time.Since(started).Seconds())
		case ctx.Err() == nil:
			s.log.Error("backup failed", "err", err)
		}
	}()
	// Until its first byte, a backup that fails can still be answered
	// 503: a small one is whole before it writes anything (its writer
	// buffers), and a cluster's reads of other nodes come first.
	select {
	case <-out.started:
	case err := <-done:
		if err != nil {
			cancel()
			return reply{}, kiterr.New(kiterr.Unavailable, "the backup failed: "+err.Error())
		}
	}
	h := &in.ctx.Response.Header
	h.SetContentType("application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="kitd-`+started.UTC().Format("20060102T150405Z")+`.backup"`)
	h.Set("Cache-Control", "no-store")
	in.ctx.SetBodyStream(&backupStream{pr: pr, conn: in.ctx.Conn(), cancel: cancel}, -1)
	return answered()
}

// firstWrite says when its first write begins.
type firstWrite struct {
	w       io.Writer
	once    sync.Once
	started chan struct{}
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.started) })
	return f.w.Write(p)
}

// backupStream is the response body of a backup. Each read extends the
// connection's write deadline, and Close (the response written, or the
// client gone) stops the backup.
type backupStream struct {
	pr     *io.PipeReader
	conn   net.Conn
	cancel context.CancelFunc
}

func (b *backupStream) Read(p []byte) (int, error) {
	if b.conn != nil {
		_ = b.conn.SetWriteDeadline(time.Now().Add(backupIdle))
	}
	return b.pr.Read(p)
}

func (b *backupStream) Close() error {
	b.cancel()
	return b.pr.Close()
}
