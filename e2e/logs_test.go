package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/eventually"
)

// requestLine waits for the JSON line of a request whose field key is
// value in s's log, and returns it.
func requestLine(t *testing.T, s *Server, key, value string) map[string]any {
	t.Helper()
	var found map[string]any
	if !eventually.Holds(eventually.Within, func() bool { // the log is flushed every 100 ms
		sc := bufio.NewScanner(bytes.NewReader(s.errOut.all()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "request" && line[key] == value {
				found = line
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no request line with %s %q in the log:\n%s", key, value, s.errOut.tail(4<<10))
	}
	return found
}

// One JSON line per request (docs/decisions.md "Logs"): the
// route's pattern, status, duration, installation, client address, node
// and, for a failure, the correlation id of its error body; never the path
// as sent.
func TestRequestLogLines(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{})
	env := newBotEnv(t, s)

	t.Run("a failure's line has every field and the error body's correlationId", func(t *testing.T) {
		r := env.In.api(t, "GET", "/messages/"+newUUID(), nil)
		wantError(t, r, 404, "not_found")
		corr := r.Str("correlationId")
		line := requestLine(t, s, "correlationId", corr)
		for k, v := range map[string]any{"level": "INFO", "route": "GET /api/v1/messages/{id}", "status": float64(404), "installation": env.In.ID, "client": "127.0.0.1"} {
			if line[k] != v {
				t.Errorf("%s = %v, want %v: %v", k, line[k], v, line)
			}
		}
		if d, ok := line["durationUs"].(float64); !ok || d < 0 {
			t.Errorf("durationUs %v", line["durationUs"])
		}
		if n, _ := line["node"].(string); n == "" {
			t.Errorf("no node: %v", line)
		}
		if _, ok := line["time"].(string); !ok {
			t.Errorf("no time: %v", line)
		}
	})
	t.Run("a webhook URL is logged by its pattern, never its secret", func(t *testing.T) {
		installation, secret := newUUID(), randToken()
		r := s.do(t, "POST", "/hooks/v1/"+installation+"/"+newUUID()+"/"+secret, "", map[string]any{"text": "hi"}, nil)
		wantError(t, r, 404, "not_found")
		line := requestLine(t, s, "correlationId", r.Str("correlationId"))
		if line["route"] != "POST /hooks/v1/{installationId}/{webhookId}/{secret}" || line["installation"] != installation {
			t.Errorf("line %v", line)
		}
		if strings.Contains(string(s.errOut.all()), secret) {
			t.Fatal("the webhook URL's secret is in the log")
		}
	})
	t.Run("a success has its line too, without a correlationId", func(t *testing.T) {
		text := "logged-" + randHex(8)
		env.In.post(t, env.Chan.ID, text)
		var first map[string]any
		if !eventually.Holds(eventually.Within, func() bool {
			sc := bufio.NewScanner(bytes.NewReader(s.errOut.all()))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var line map[string]any
				if json.Unmarshal(sc.Bytes(), &line) == nil && line["route"] == "POST /api/v1/messages" && line["status"] == float64(201) {
					first = line
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no line of the post:\n%s", s.errOut.tail(4<<10))
		}
		if _, ok := first["correlationId"]; ok || first["installation"] != env.In.ID {
			t.Errorf("line %v", first)
		}
		if strings.Contains(string(s.errOut.all()), text) {
			t.Fatal("a message's text is in the log")
		}
	})
}

// The node logs its lifecycle (docs/decisions.md "Logs"): starting, ready, then on SIGTERM
// draining and stopped, each naming the node; the lines buffered at the
// stop are flushed before the process exits.
func TestLifecycleLogLines(t *testing.T) {
	t.Parallel()
	s := startServerOpts(t, ServerOpts{})
	if !s.stopClean(t) {
		t.Fatal("the server did not stop cleanly")
	}
	var msgs []string
	sc := bufio.NewScanner(bytes.NewReader(s.errOut.all()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			t.Fatalf("a line that is not JSON: %q", sc.Text())
		}
		if n, _ := line["node"].(string); n == "" {
			t.Errorf("a line without node: %q", sc.Text())
		}
		switch m, _ := line["msg"].(string); m {
		case "starting", "ready", "draining", "stopped":
			msgs = append(msgs, m)
		}
	}
	if got := strings.Join(msgs, ","); got != "starting,ready,draining,stopped" {
		t.Fatalf("lifecycle lines %s, want starting,ready,draining,stopped:\n%s", got, s.errOut.tail(4<<10))
	}
}
