package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Every JSON line a server writes names each key once (docs/decisions.md
// "Logs"): a collector keeps one of two `node` keys, and which one is its
// own choice. TestMain checks the output of every server the run started,
// cluster nodes included, once the tests are done. Request lines are left
// out: the front end writes them byte for byte as slog would
// (http/api/requestlog.go, TestRequestLogIsSlogsLine), and they are most
// of the output.
func duplicatedLogKeys() []string {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	var found []string
	for _, s := range secrets.servers {
		for _, out := range [][]byte{s.out.all(), s.errOut.all()} {
			found = append(found, duplicatedKeysIn(serverName(s), out)...)
		}
	}
	return found
}

// serverName names a server by its node name and data directory, not by
// all its flags: they hold its operator token and cluster key.
func serverName(s *Server) string {
	name := "kitd --data " + s.DataDir
	if i := slices.Index(s.Args, "--node-name"); i >= 0 && i+1 < len(s.Args) {
		name += " --node-name " + s.Args[i+1]
	}
	return name
}

// duplicatedKeysIn lists, for the output out of the server named server,
// each key some line has twice, with the first such line's msg (at most
// 60 bytes of it) and not the line itself: its values may be anything.
func duplicatedKeysIn(server string, out []byte) []string {
	var found []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) || bytes.Contains(line, []byte(`"msg":"request"`)) {
			continue
		}
		key, msg := duplicatedKey(line)
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		if len(msg) > 60 {
			msg = msg[:60]
		}
		found = append(found, fmt.Sprintf("%s: the key %q twice in a line (the first: %q)", server, key, msg))
	}
	return found
}

// duplicatedKey returns the first key of the JSON object line that comes
// twice, and the line's msg (when it comes before); "" when no key does or
// line is not an object.
func duplicatedKey(line []byte) (key, msg string) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	keys := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", ""
		}
		k, _ := t.(string)
		if keys[k] {
			return k, msg
		}
		keys[k] = true
		var value json.RawMessage
		if dec.Decode(&value) != nil {
			return "", ""
		}
		if k == "msg" {
			_ = json.Unmarshal(value, &msg)
		}
	}
	return "", ""
}

// The check finds a key written twice at the top of a line, and nothing
// else: not a key repeated inside a value, not a request line, not text.
func TestDuplicatedLogKeysCheck(t *testing.T) {
	out := strings.Join([]string{
		`{"time":"t","level":"ERROR","msg":"memberlist: x","node":"n3","node":"n3"}`,
		`{"time":"t","level":"INFO","msg":"step","node":"n1","component":"replication","node":7}`, // the same key: once
		`{"time":"t","level":"INFO","msg":"fine","node":"n1","err":{"node":1,"inner":{"node":2}}}`,
		`{"time":"t","level":"INFO","msg":"request","node":"n1","node":"n1"}`,
		`kitd listening on 127.0.0.1:1`,
		`{"broken"`,
	}, "\n")
	got := duplicatedKeysIn("n1", []byte(out))
	want := []string{`n1: the key "node" twice in a line (the first: "memberlist: x")`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
