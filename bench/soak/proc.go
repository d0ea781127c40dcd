package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is what /proc says about one process.
type Process struct {
	RSSBytes  int64
	Threads   int
	OpenFiles int
}

// ReadProcess reads the resident set size and thread count from
// /proc/<pid>/status and counts the entries of /proc/<pid>/fd.
func ReadProcess(pid int) (Process, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	f, err := os.Open(dir + "/status")
	if err != nil {
		return Process{}, err
	}
	defer f.Close()
	p, err := parseStatus(f)
	if err != nil {
		return Process{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return Process{}, err
	}
	p.OpenFiles = len(fds)
	return p, nil
}

// parseStatus reads VmRSS (kB) and Threads from a /proc/<pid>/status text.
func parseStatus(r io.Reader) (Process, error) {
	var p Process
	var haveRSS, haveThreads bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "VmRSS":
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return p, fmt.Errorf("line VmRSS %q: %w", val, err)
			}
			p.RSSBytes, haveRSS = kb<<10, true
		case "Threads":
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return p, fmt.Errorf("line Threads %q: %w", val, err)
			}
			p.Threads, haveThreads = n, true
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if !haveRSS || !haveThreads {
		return p, errors.New("no VmRSS or Threads line")
	}
	return p, nil
}

// DirSize is the total size of the regular files under dir.
func DirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by a compaction while we walked
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// Goroutines asks a net/http/pprof endpoint (kitd's `--pprof ADDR`) for
// its goroutine count: the first line of /debug/pprof/goroutine?debug=1
// reads "goroutine profile: total N".
func Goroutines(ctx context.Context, c *http.Client, pprofAddr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+pprofAddr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("pprof answered %s", resp.Status)
	}
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return 0, err
	}
	return parseGoroutineTotal(line)
}

func parseGoroutineTotal(line []byte) (int, error) {
	const prefix = "goroutine profile: total "
	line = bytes.TrimSpace(line)
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return 0, fmt.Errorf("pprof goroutine profile starts %q", line)
	}
	return strconv.Atoi(string(line[len(prefix):]))
}
