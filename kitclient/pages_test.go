package kitclient

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestIterators(t *testing.T) {
	ctx := context.Background()
	page := func(key string, items []string, next string) reply {
		n := "null"
		if next != "" {
			n = `"` + next + `"`
		}
		var objs []string
		for _, id := range items {
			objs = append(objs, fmt.Sprintf(`{"id":%q,"userId":%q}`, id, id))
		}
		return reply{status: 200, body: fmt.Sprintf(`{"%s":[%s],"nextCursor":%s}`, key, strings.Join(objs, ","), n)}
	}
	ids := func(seq func(yield func(string, error) bool)) ([]string, error) {
		var out []string
		for id, err := range seq {
			if err != nil {
				return out, err
			}
			out = append(out, id)
		}
		return out, nil
	}
	tests := []struct {
		name    string
		replies []reply
		walk    func(*Client) ([]string, error)
		want    []string
		uris    []string
	}{
		{"conversations stop at the page whose nextCursor is null",
			[]reply{page("conversations", []string{"a", "b"}, "p2"), page("conversations", []string{"c"}, "")},
			func(c *Client) ([]string, error) {
				return ids(func(yield func(string, error) bool) {
					for v, err := range c.Conversations(ctx, 2) {
						if !yield(v.ID, err) {
							return
						}
					}
				})
			},
			[]string{"a", "b", "c"}, []string{"/api/v1/conversations?limit=2", "/api/v1/conversations?cursor=p2&limit=2"}},
		{"members follow the cursor",
			[]reply{page("members", []string{"a"}, "x"), page("members", nil, "")},
			func(c *Client) ([]string, error) {
				return ids(func(yield func(string, error) bool) {
					for v, err := range c.Members(ctx, "c1", 0) {
						if !yield(v.UserID, err) {
							return
						}
					}
				})
			},
			[]string{"a"}, []string{"/api/v1/conversations/c1/members", "/api/v1/conversations/c1/members?cursor=x"}},
		{"messages of one page",
			[]reply{page("messages", []string{"m2", "m1"}, "")},
			func(c *Client) ([]string, error) {
				return ids(func(yield func(string, error) bool) {
					for v, err := range c.Messages(ctx, "c1", 50) {
						if !yield(v.ID, err) {
							return
						}
					}
				})
			},
			[]string{"m2", "m1"}, []string{"/api/v1/conversations/c1/messages?limit=50"}},
		{"replies",
			[]reply{page("messages", []string{"r2"}, "n"), page("messages", []string{"r1"}, "")},
			func(c *Client) ([]string, error) {
				return ids(func(yield func(string, error) bool) {
					for v, err := range c.Replies(ctx, "m1", 1) {
						if !yield(v.ID, err) {
							return
						}
					}
				})
			},
			[]string{"r2", "r1"}, []string{"/api/v1/messages/m1/replies?limit=1", "/api/v1/messages/m1/replies?cursor=n&limit=1"}},
		{"users",
			[]reply{page("users", []string{"u1"}, "")},
			func(c *Client) ([]string, error) {
				return ids(func(yield func(string, error) bool) {
					for v, err := range c.Users(ctx, 0) {
						if !yield(v.ID, err) {
							return
						}
					}
				})
			},
			[]string{"u1"}, []string{"/api/v1/users"}},
		{"breaking out of the loop fetches no further page",
			[]reply{page("users", []string{"u1", "u2"}, "more"), page("users", []string{"u3"}, "")},
			func(c *Client) ([]string, error) {
				for v := range c.Users(ctx, 2) {
					return []string{v.ID}, nil
				}
				return nil, nil
			},
			[]string{"u1"}, []string{"/api/v1/users?limit=2"}},
		{"an error ends the walk once",
			[]reply{page("users", []string{"u1"}, "more"), {status: 400, body: fmt.Sprintf(errorBody, "validation_error", "cursor: is not a cursor of this list")}},
			func(c *Client) ([]string, error) {
				var got []string
				var errs []error
				for v, err := range c.Users(ctx, 0) {
					if err != nil {
						errs = append(errs, err)
						continue
					}
					got = append(got, v.ID)
				}
				if len(errs) != 1 {
					return got, fmt.Errorf("%d errors yielded, want 1", len(errs))
				}
				return got, nil
			},
			[]string{"u1"}, []string{"/api/v1/users", "/api/v1/users?cursor=more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.replies...)
			got, err := tt.walk(testClient(f, newFakeClock()))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			var uris []string
			for _, r := range f.requests() {
				uris = append(uris, r.uri)
			}
			if !slices.Equal(uris, tt.uris) {
				t.Errorf("fetched %q, want %q", uris, tt.uris)
			}
		})
	}
}
