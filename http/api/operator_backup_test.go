package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestBackupRoute(t *testing.T) {
	whole := bytes.Repeat([]byte("kitd backup bytes "), 50_000) // under the test client's 1 MiB
	tests := []struct {
		name   string
		backup BackupFunc
		token  string
		status int
		body   []byte
	}{
		{"a backup streams what its maker writes", func(_ context.Context, out io.Writer) error {
			_, err := out.Write(whole)
			return err
		}, ts.opToken, 200, whole},
		{"a node that makes no backups answers 503", nil, ts.opToken, 503, nil},
		{"a backup that fails before its first byte answers 503", func(context.Context, io.Writer) error {
			return errors.New("no holder of partition 3 answered")
		}, ts.opToken, 503, nil},
		{"the operator token is needed", func(context.Context, io.Writer) error {
			t.Error("a backup was made without the operator token")
			return nil
		}, "", 401, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts.srv.backup = tt.backup
			t.Cleanup(func() { ts.srv.backup = nil })
			r := ts.do(t, request{method: "GET", path: "/ops/v1/backup", token: tt.token})
			if tt.status != 200 {
				wantError(t, r, tt.status, map[int]string{503: "unavailable", 401: "invalid_token"}[tt.status])
				return
			}
			want(t, r, 200)
			if ct := r.hdr("Content-Type"); ct != "application/octet-stream" {
				t.Fatalf("Content-Type %q", ct)
			}
			if !bytes.Equal(r.body, tt.body) {
				t.Fatalf("body of %d bytes, want the %d the maker wrote", len(r.body), len(tt.body))
			}
		})
	}
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	deadlines []time.Time
}

func (c *deadlineConn) SetWriteDeadline(d time.Time) error {
	c.deadlines = append(c.deadlines, d)
	return nil
}

// TestBackupReadsExtendTheWriteDeadline: the server's write timeout is
// for one response; a backup extends it with each chunk.
func TestBackupReadsExtendTheWriteDeadline(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("one"))
		pw.Write([]byte("two"))
		pw.Close()
	}()
	conn := &deadlineConn{}
	b := &backupStream{pr: pr, conn: conn, cancel: func() {}}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "onetwo" {
		t.Fatalf("read %q, %v", got, err)
	}
	if len(conn.deadlines) < 2 || time.Until(conn.deadlines[len(conn.deadlines)-1]) < backupIdle-time.Second {
		t.Fatalf("write deadlines set: %v, want one a read, %v ahead", conn.deadlines, backupIdle)
	}
}
