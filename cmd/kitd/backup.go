package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kitd/kitd/internal/partition"
	"github.com/kitd/kitd/persistence/backup"
)

// restore is `kitd restore --from FILE --data DIR` (OPERATIONS.md section
// 8): FILE "-" is standard input.
func restore(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", "", "the backup file (GET /ops/v1/backup's answer); - reads standard input")
	dataDir := fs.String("data", (&envReader{lookup: os.LookupEnv}).str("KIT_DATA_DIR", ""), "the data directory to make: missing or empty")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kitd restore takes flags only: %d argument(s) left over after the flags (a word that is not a flag ends them)", fs.NArg())
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
