package jepsen

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Developer is a workspace's developer token, as the developer API takes
// it.
type Developer struct {
	Workspace, Token string
}

// defaultTimeout bounds one operation of a run that sets no Timeout.
const defaultTimeout = 10 * time.Second

// SlugRun races slug claims: for each slug in turn, every claimer uploads
// a first version naming it Claims times, while every observer validates
// a manifest naming it Checks times. Each goroutine sends its operations
// one after another, to the nodes in turn.
type SlugRun struct {
	Nodes     []string
	Claimers  []Developer
	Observers []Developer
	Slugs     []string
	// Manifest is the manifest text a developer sends for a slug: the
	// same for each of its operations on it.
	Manifest       func(slug string, dev Developer) string
	Claims, Checks int // per developer and slug; default 2 and 3
	// Timeout bounds one operation (default 10 s); past it, its outcome
	// is unknown.
	Timeout time.Duration
	Client  Client
}

// Record runs the claims and returns every operation.
func (r *SlugRun) Record(ctx context.Context) []porcupine.Operation {
	r.Claims, r.Checks, r.Timeout = cmp.Or(r.Claims, 2), cmp.Or(r.Checks, 3), cmp.Or(r.Timeout, defaultTimeout)
	rec := newRecorder()
	for _, slug := range r.Slugs {
		type actor struct {
			dev   Developer
			check bool
			n     int
		}
		var actors []actor
		for _, d := range r.Claimers {
			actors = append(actors, actor{d, false, r.Claims})
		}
		for _, d := range r.Observers {
			actors = append(actors, actor{d, true, r.Checks})
		}
		rec.race(len(actors), func(client, i int) {
			a := actors[client]
			if i >= a.n {
				return
			}
			in := SlugInput{Slug: slug, Workspace: a.dev.Workspace, Check: a.check}
			path := "/api/v1/dev/kits/versions"
			if a.check {
				path = "/api/v1/dev/kits/validate"
			}
			node := r.Nodes[(client+i)%len(r.Nodes)]
			body := map[string]any{"manifest": r.Manifest(slug, a.dev)}
			rec.op(client, in, func() (any, bool) {
				e, err := r.Client.do(ctx, r.Timeout, "POST", node+path, a.dev.Token, nil, body)
				out := slugOutput(e, err, a.check)
				return out, out.Result == Unknown
			})
		}, max(r.Claims, r.Checks))
	}
	return rec.ops
}

func slugOutput(e *Exchange, err error, check bool) SlugOutput {
	switch {
	case err != nil || e.Status >= 500:
		return SlugOutput{Result: Unknown}
	case check && e.Status == 200:
		var b struct {
			Valid    bool `json:"valid"`
			Problems []struct {
				Path string `json:"path"`
			} `json:"problems"`
		}
		if json.Unmarshal(e.Body, &b) == nil {
			switch {
			case b.Valid:
				return SlugOutput{Result: Open}
			case len(b.Problems) > 0 && b.Problems[0].Path == "slug":
				return SlugOutput{Result: Taken}
			}
		}
	case !check && e.Status == 201:
		var b struct {
			KitID   string `json:"kitId"`
			Created bool   `json:"created"`
		}
		if json.Unmarshal(e.Body, &b) == nil && b.KitID != "" {
			return SlugOutput{Result: Claimed, KitID: b.KitID, Created: b.Created}
		}
	case !check && e.Status == 409 && e.code() == "slug_taken":
		return SlugOutput{Result: Taken}
	}
	return SlugOutput{Result: Unexpected, Detail: fmt.Sprintf("%d %s", e.Status, clip(e.Body))}
}

// ReplayRun races posts that share an Idempotency-Key: for each of Keys
// keys in turn, Concurrency posts are sent at once, all with one text
// (even keys) or half with one text and half with another (odd keys).
type ReplayRun struct {
	Nodes        []string
	Token        string
	Conversation string
	Keys         int // default 12
	Concurrency  int // default 8
	// Timeout bounds one post (default 10 s); past it, its outcome is
	// unknown.
	Timeout time.Duration
	Client  Client
}

// Record runs the posts and returns every operation.
func (r *ReplayRun) Record(ctx context.Context) []porcupine.Operation {
	r.Keys, r.Concurrency, r.Timeout = cmp.Or(r.Keys, 12), cmp.Or(r.Concurrency, 8), cmp.Or(r.Timeout, defaultTimeout)
	rec := newRecorder()
	run := time.Now().UnixNano()
	for k := range r.Keys {
		key := fmt.Sprintf("replay-%x-%02d", run, k)
		rec.race(r.Concurrency, func(client, _ int) {
			text := "replayed " + key
			if k%2 == 1 && client%2 == 1 {
				text = "other content for " + key
			}
			node := r.Nodes[client%len(r.Nodes)]
			body := map[string]any{"conversationId": r.Conversation, "text": text}
			rec.op(client, PostInput{Key: key, Text: text}, func() (any, bool) {
				e, err := r.Client.do(ctx, r.Timeout, "POST", node+"/api/v1/messages", r.Token, map[string]string{"Idempotency-Key": key}, body)
				out := postOutput(e, err)
				return out, out.Result == Unknown
			})
		}, 1)
	}
	return rec.ops
}

func postOutput(e *Exchange, err error) PostOutput {
	if err != nil || e.Status >= 500 {
		return PostOutput{Result: Unknown}
	}
	var b struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	switch {
	case e.Status == 409 && e.code() == "idempotency_conflict":
		return PostOutput{Result: Conflict}
	case (e.Status == 201 || e.Status == 200) && json.Unmarshal(e.Body, &b) == nil && b.Message.ID != "":
		res := Created
		if e.Status == 200 {
			res = Replayed
		}
		return PostOutput{Result: res, ID: b.Message.ID}
	}
	return PostOutput{Result: Unexpected, Detail: fmt.Sprintf("%d %s", e.Status, clip(e.Body))}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// recorder times operations on one monotonic clock, as porcupine wants.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

func newRecorder() *recorder { return &recorder{base: time.Now()} }

// op runs f and records it; f reports whether its outcome is unknown, in
// which case the operation never returns.
func (r *recorder) op(client int, input any, f func() (output any, unknown bool)) {
	call := time.Since(r.base).Nanoseconds()
	out, unknown := f()
	ret := time.Since(r.base).Nanoseconds()
	if unknown {
		ret = never
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: input, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// race runs clients goroutines that are released together and each call
// f(client, i) for i below rounds, then waits for them.
func (r *recorder) race(clients int, f func(client, i int), rounds int) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range rounds {
				f(c, i)
			}
		}()
	}
	close(start)
	wg.Wait()
}
