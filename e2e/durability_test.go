package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// docs/architecture.md "Persistence": a write is acknowledged only after it is durable
// in Pebble, so kill -9 at any moment loses nothing that was answered 2xx.
// CONTRIBUTING.md "Style": tests that kill the process are the proof.
//
// Each round: 16 posters write into 4 conversations as fast as the server
// answers; at a random moment between 1 and 3 s the server gets SIGKILL. After
// a restart on the same data directory every acknowledged message must be
// there, unchanged, in each poster's acknowledgement order; a post that was in
// flight is either wholly there or absent. Then a clean SIGTERM restart must
// keep everything, and new posts must land after the old ones.
func TestDurability(t *testing.T) {
	for round := 1; round <= 3; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) { durabilityRound(t, round, nil) })
	}
}

// The same rounds with every write committed through its partition's raft
// group (--replicate), as a node of a cluster commits it: a write is
// acknowledged once its entry is synced and applied.
func TestDurabilityReplicated(t *testing.T) {
	for round := 1; round <= 2; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) { durabilityRound(t, round, []string{"--replicate"}) })
	}
}

// A directory that ran with raft groups is served only with them
// (docs/cluster.md, "A node alone"): its records are the groups' applied
// state, and a write made straight to them would be undone when the
// groups apply their logs again. Started without --replicate, kitd says so
// and exits before it serves; started with it again, it serves every
// message it had.
func TestADirectoryThatRanGroupsIsServedOnlyWithThem(t *testing.T) {
	opts := ServerOpts{DataDir: t.TempDir(), OpToken: "op_" + randToken(), Limits: "off", Args: []string{"--replicate"}}
	s := startServerOpts(t, opts)
	w := newWorkspace(t, s)
	conv := w.channel(t, "public", w.Owner.ID, w.Mem.ID).ID
	in := w.install(t, w.kit(t, baseScopes...), conv)
	posted := s.api(t, in.Token, "POST", "/messages", postBody(conv, "committed through a group"), nil)
	want(t, posted, 201)
	s.stopClean(t)

	alone := opts
	alone.Args = nil
	if s2, err := launch(alone); err == nil {
		s2.stop(startupTimeout)
		t.Fatal("kitd served without --replicate a directory that ran with it")
	} else if !strings.Contains(err.Error(), "ran with raft groups") {
		t.Fatalf("kitd did not say why it refused:\n%v", err)
	}

	s3 := startServerOpts(t, opts)
	if got, wantKeys := historyKeys(t, s3, in.Token, conv), []string{posted.Str("message.id") + "\x00committed through a group"}; !equalStrings(got, wantKeys) {
		t.Fatalf("after the refused start the conversation holds %q, want %q", got, wantKeys)
	}
}

const (
	posters       = 16
	conversations = 4
)

type ackedPost struct {
	id, text, conv string
}

type postLog struct {
	mu       sync.Mutex
	acked    [posters][]ackedPost // per poster, in acknowledgement order
	inFlight map[string]string    // text -> conversation: sent, no answer (outcome unknown)
	bad      []string             // answers other than 201 before the kill
	byText   map[string]ackedPost
}

func durabilityRound(t *testing.T, round int, args []string) {
	roundStart := time.Now()
	defer func() { t.Logf("round took %v", time.Since(roundStart).Round(time.Millisecond)) }()
	dir := t.TempDir()
	opts := ServerOpts{DataDir: dir, OpToken: "op_" + randToken(), Limits: "off", Args: args}
	s := startServerOpts(t, opts)

	w := newWorkspace(t, s)
	k := w.kit(t, baseScopes...)
	var convs []string
	for i := 0; i < conversations; i++ {
		convs = append(convs, w.channel(t, "public", w.Owner.ID, w.Mem.ID).ID)
	}
	in := w.install(t, k, convs...)

	t.Logf("setup: %v", time.Since(roundStart).Round(time.Millisecond))
	log := &postLog{inFlight: map[string]string{}, byText: map[string]ackedPost{}}
	var wg sync.WaitGroup
	for p := 0; p < posters; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			conv := convs[p%conversations]
			for n := 0; ; n++ {
				text := fmt.Sprintf("round %d poster %02d post %06d %s", round, p, n, randHex(4))
				r, err := s.request("POST", "/api/v1/messages", in.Token, postBody(conv, text), nil)
				log.mu.Lock()
				switch {
				case err != nil:
					log.inFlight[text] = conv
					log.mu.Unlock()
					return
				case r.Status == 201 && r.Str("message.id") != "" && r.Str("message.text") == text:
					a := ackedPost{id: r.Str("message.id"), text: text, conv: conv}
					log.acked[p] = append(log.acked[p], a)
					log.byText[text] = a
					log.mu.Unlock()
				default:
					if !s.exited() {
						log.bad = append(log.bad, r.String())
					}
					log.inFlight[text] = conv
					log.mu.Unlock()
					return
				}
			}
		}(p)
	}

	killAfter := time.Second + rand.N(2*time.Second)
	time.Sleep(killAfter)
	s.kill()
	phase := time.Now()
	wg.Wait()
	t.Logf("posters stopped %v after the kill", time.Since(phase).Round(time.Millisecond))

	total := 0
	for p := range log.acked {
		total += len(log.acked[p])
	}
	t.Logf("SIGKILL after %v: %d posts acknowledged, %d in flight", killAfter.Round(time.Millisecond), total, len(log.inFlight))
	for i, b := range log.bad {
		if i == 5 {
			t.Errorf("... %d more", len(log.bad)-5)
			break
		}
		t.Errorf("post answered other than 201 while the server ran:%s", b)
	}
	if total == 0 {
		t.Fatalf("no post was acknowledged in %v", killAfter)
	}

	phase = time.Now()
	s2 := startServerOpts(t, opts)
	t.Logf("restart after SIGKILL: listening after %v", time.Since(phase).Round(time.Millisecond))
	phase = time.Now()
	checkEveryAckedMessage(t, s2, in.Token, log)
	t.Logf("GET of every acknowledged message: %v", time.Since(phase).Round(time.Millisecond))
	phase = time.Now()
	lists := checkHistories(t, s2, in.Token, convs, log)
	t.Logf("history walk: %v", time.Since(phase).Round(time.Millisecond))

	// New posts after the crash land after everything recovered (no reused
	// sequence numbers, no overwritten history).
	for i, c := range convs {
		r := s2.api(t, in.Token, "POST", "/messages", postBody(c, fmt.Sprintf("round %d after crash %d", round, i)), nil)
		want(t, r, 201)
		lists[c] = append([]string{r.Str("message.id") + "\x00" + r.Str("message.text")}, lists[c]...)
	}
	for _, c := range convs {
		if got := historyKeys(t, s2, in.Token, c); !equalStrings(got, lists[c]) {
			t.Errorf("conversation %s after posting on the recovered server: %d messages, want %d (the new one first)", c, len(got), len(lists[c]))
		}
	}

	// A clean stop keeps everything.
	phase = time.Now()
	s2.stopClean(t)
	t.Logf("SIGTERM: exited after %v", time.Since(phase).Round(time.Millisecond))
	phase = time.Now()
	s3 := startServerOpts(t, opts)
	t.Logf("restart after SIGTERM: listening after %v", time.Since(phase).Round(time.Millisecond))
	for _, c := range convs {
		if got := historyKeys(t, s3, in.Token, c); !equalStrings(got, lists[c]) {
			t.Errorf("conversation %s after a clean restart: %d messages, want the same %d as before", c, len(got), len(lists[c]))
		}
	}
	phase = time.Now()
	checkEveryAckedMessage(t, s3, in.Token, log)
	t.Logf("second GET of every acknowledged message: %v", time.Since(phase).Round(time.Millisecond))
	want(t, s3.api(t, in.Token, "GET", "/auth/test", nil, nil), 200)
}

// checkEveryAckedMessage reads every acknowledged message by id.
func checkEveryAckedMessage(t *testing.T, s *Server, token string, log *postLog) {
	t.Helper()
	work := make(chan ackedPost)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				r, err := s.request("GET", "/api/v1/messages/"+a.id, token, nil, nil)
				var msg string
				switch {
				case err != nil:
					msg = fmt.Sprintf("GET /messages/%s: %v", a.id, err)
				case r.Status != 200:
					msg = fmt.Sprintf("acknowledged message lost after restart:%s", r)
				case r.Str("message.id") != a.id || r.Str("message.text") != a.text || r.Str("message.conversationId") != a.conv:
					msg = fmt.Sprintf("acknowledged message changed after restart: want text %q in %s%s", a.text, a.conv, r)
				}
				if msg != "" {
					mu.Lock()
					failures = append(failures, msg)
					mu.Unlock()
				}
			}
		}()
	}
	for p := range log.acked {
		for _, a := range log.acked[p] {
			work <- a
		}
	}
	close(work)
	wg.Wait()
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... %d more acknowledged messages missing or changed", len(failures)-10)
			break
		}
		t.Error(f)
	}
}

// checkHistories walks every conversation and checks order and completeness.
// It returns each conversation's history keys (id NUL text), newest first.
func checkHistories(t *testing.T, s *Server, token string, convs []string, log *postLog) map[string][]string {
	t.Helper()
	lists := map[string][]string{}
	for _, c := range convs {
		items := walk(t, s, token, "/conversations/"+c+"/messages", "messages", 200)
		pos := map[string]int{} // id -> position, oldest first
		seenText := map[string]bool{}
		var keys []string
		present, inFlightPresent := 0, 0
		for i, m := range items {
			id, text := jstr(m, "id"), jstr(m, "text")
			keys = append(keys, id+"\x00"+text)
			if _, dup := pos[id]; dup {
				t.Errorf("conversation %s lists message %s twice", c, id)
			}
			pos[id] = len(items) - 1 - i
			if seenText[text] {
				t.Errorf("conversation %s has two messages with text %q (a post was applied twice)", c, text)
			}
			seenText[text] = true
			if a, ok := log.byText[text]; ok {
				present++
				if a.id != id || a.conv != c {
					t.Errorf("message %q: listed as %s in %s, acknowledged as %s in %s", text, id, c, a.id, a.conv)
				}
			} else if conv, ok := log.inFlight[text]; ok {
				inFlightPresent++
				if conv != c {
					t.Errorf("in-flight post %q landed in %s, was sent to %s", text, c, conv)
				}
				if jstr(m, "author.kind") != "bot" || !isUUID(id) || jstr(m, "createdAt") == "" {
					t.Errorf("in-flight post present but not whole: %v", m)
				}
			} else {
				t.Errorf("conversation %s has a message nobody posted: %v", c, m)
			}
		}
		for p := range log.acked {
			last, lastText := -1, ""
			for _, a := range log.acked[p] {
				if a.conv != c {
					continue
				}
				at, ok := pos[a.id]
				if !ok {
					t.Errorf("acknowledged message %s %q missing from the history of %s", a.id, a.text, c)
					continue
				}
				if at < last {
					t.Errorf("poster %d: %q was acknowledged after %q but is listed before it", p, a.text, lastText)
				}
				last, lastText = at, a.text
			}
		}
		t.Logf("conversation %s: %d messages, %d acknowledged, %d of the in-flight posts", c, len(items), present, inFlightPresent)
		lists[c] = keys
	}
	return lists
}

func historyKeys(t *testing.T, s *Server, token, conv string) []string {
	t.Helper()
	var keys []string
	for _, m := range walk(t, s, token, "/conversations/"+conv+"/messages", "messages", 200) {
		keys = append(keys, jstr(m, "id")+"\x00"+jstr(m, "text"))
	}
	return keys
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
