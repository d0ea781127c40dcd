package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/kitd/kitd/http/api"
	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence"
	"github.com/kitd/kitd/persistence/backup"
	"github.com/kitd/kitd/replication"
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
func backups(store *persistence.Store, keys sealKeys, g groups) api.BackupFunc {
	files := backupFiles(keys)
	header := func() backup.Header {
		return backup.Header{Kitd: buildOf(debug.ReadBuildInfo()).String(), CreatedAt: time.Now().UTC(), Partitions: partition.Count}
	}
	if m := g.member; m != nil {
		return func(ctx context.Context, out io.Writer) error {
			return m.Backup(ctx, out, header(), files)
		}
	}
	return func(_ context.Context, out io.Writer) error {
		return backup.Node(out, store, header(), files, replication.NodeLocal)
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

// restore is `kitd restore --from FILE --data DIR` (OPERATIONS.md section
// 8): FILE "-" is standard input.
func restore(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", "", "the backup file (GET /ops/v1/backup's answer); - reads standard input")
	dataDir := fs.String("data", (&envReader{lookup: os.LookupEnv}).str("KIT_DATA_DIR", ""), "the data directory to make: missing or empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || *dataDir == "" {
		return errors.New("restore needs --from FILE and --data DIR")
	}
	in := stdin
	if *from != "-" {
		f, err := os.Open(*from)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	s, err := backup.Restore(in, *dataDir, func(h backup.Header) error {
		if h.Partitions != partition.Count {
			return fmt.Errorf("the backup's keys are laid out in %d partitions, this build's in %d", h.Partitions, partition.Count)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore from %s refused, %s left as it was: %w", *from, *dataDir, err)
	}
	h := s.Header
	fmt.Fprintf(stdout, "kitd restored %d records and %d files into %s: a backup of a %s, made %s by kitd %s\n",
		s.Records, s.Files, *dataDir, h.Source, h.CreatedAt.Format(time.RFC3339), h.Kitd)
	return nil
}
