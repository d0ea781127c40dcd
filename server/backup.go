package server

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/kitd/kitd/http/api"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/multiraft"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
)

// backups makes the backups of GET /ops/v1/backup: a node alone (with
// --replicate too: it leads every group, and applied every write it
// answered) from one snapshot of its store, a member of a cluster from
// every partition's leader. Both carry <data>/secret-key and, when it is
// another key (a cluster's, or the one a restore brought), the sealing key
// as <data>/sealing-key, without which the Kits' sealed signing secrets
// could not be opened after a restore (sealingKeys), and neither the
// operator token (given again, or made anew, on the first start of the
// restored directory) nor any raft state.
func backups(store *persistence.Store, keys sealKeys, g groups, build Build) api.BackupFunc {
	files := backupFiles(keys)
	header := func() backup.Header {
		return backup.Header{Kitd: build.String(), CreatedAt: time.Now().UTC(), Partitions: partition.Count}
	}
	if m := g.clusterNode; m != nil {
		return func(ctx context.Context, out io.Writer) error {
			return m.Backup(ctx, out, header(), files)
		}
	}
	return func(_ context.Context, out io.Writer) error {
		return backup.Node(out, store, header(), files, multiraft.NodeLocal)
	}
}

// backupFiles are the files of the data directory a backup carries.
func backupFiles(keys sealKeys) []backup.File {
	files := []backup.File{{Name: "secret-key", Data: keys.own}}
	if !bytes.Equal(keys.seal, keys.own) {
		files = append(files, backup.File{Name: sealingKeyFile, Data: keys.seal})
	}
	return files
}
