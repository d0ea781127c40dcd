package domainproof_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/domainproof"
)

// fakeResolver and fakeFetcher record what the Checker asks and answer
// fixed values, so the Checker's own rules are tested without a network.
type fakeResolver struct {
	asked []string
	txts  []string
	err   error
}

func (f *fakeResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	f.asked = append(f.asked, name)
	return f.txts, f.err
}

type fakeFetcher struct {
	asked  []string
	max    int64
	status int
	body   string
	err    error
}

func (f *fakeFetcher) Fetch(_ context.Context, url string, max int64) (int, []byte, error) {
	f.asked = append(f.asked, url)
	f.max = max
	return f.status, []byte(f.body), f.err
}

const (
	kitID     = "8c6f2a4e-1b2d-4c3e-9f00-1234567890ab"
	challenge = "q0Vn2x1kTQ4Xc8u2Zb6yRr5l0pJmWfHsA9dE3gKtLiY"
)

func TestCheckDNSAsksForTheChallengeHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		domain    string
		res       fakeResolver
		wantAsked []string
		wantErr   error
	}{
		{
			"the lookup is of _kit-challenge.<domain>, folded to lowercase",
			"Kit.Example.COM",
			fakeResolver{txts: []string{"kit-verification=" + challenge}},
			[]string{"_kit-challenge.kit.example.com"}, nil,
		},
		{
			"a lookup failure is a missing proof that keeps its cause",
			"kit.example.com",
			fakeResolver{err: errServFail},
			[]string{"_kit-challenge.kit.example.com"}, errServFail,
		},
		{
			"an invalid domain is refused without a lookup",
			"kit.example.com/x",
			fakeResolver{txts: []string{"kit-verification=" + challenge}},
			nil, domainproof.ErrProofNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &domainproof.Checker{Resolver: &tt.res, Fetcher: &fakeFetcher{}}
			err := c.CheckDNS(context.Background(), kitID, tt.domain, challenge)
			if strings.Join(tt.res.asked, ",") != strings.Join(tt.wantAsked, ",") {
				t.Errorf("looked up %q, want %q", tt.res.asked, tt.wantAsked)
			}
			checkErr(t, err, tt.wantErr)
		})
	}
}

var errServFail = errors.New("server failure")

func TestCheckWellKnownRulesOnTheFetchedAnswer(t *testing.T) {
	t.Parallel()
	good := `{"kitId":"` + kitID + `","token":"` + challenge + `"}`
	tests := []struct {
		name    string
		domain  string
		fetch   fakeFetcher
		wantErr error
	}{
		{"200 with the kitId and token proves the domain", "kit.example.com", fakeFetcher{status: 200, body: good}, nil},
		{"a fetch failure is a missing proof that keeps its cause", "kit.example.com", fakeFetcher{err: errServFail}, errServFail},
		{"a body over 4 KiB is refused even when the Fetcher returns it", "kit.example.com",
			fakeFetcher{status: 200, body: padded(good, 4097)}, domainproof.ErrProofNotFound},
		{"keys are matched with their exact case", "kit.example.com",
			fakeFetcher{status: 200, body: `{"KITID":"` + kitID + `","TOKEN":"` + challenge + `"}`}, domainproof.ErrProofNotFound},
		{"a missing token is refused", "kit.example.com",
			fakeFetcher{status: 200, body: `{"kitId":"` + kitID + `"}`}, domainproof.ErrProofNotFound},
		{"a token that is not a string is refused", "kit.example.com",
			fakeFetcher{status: 200, body: `{"kitId":"` + kitID + `","token":["` + challenge + `"]}`}, domainproof.ErrProofNotFound},
		{"JSON null is refused", "kit.example.com", fakeFetcher{status: 200, body: `null`}, domainproof.ErrProofNotFound},
		{"an invalid domain is refused without a fetch", "kit.example.com@evil.net", fakeFetcher{status: 200, body: good}, domainproof.ErrProofNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &domainproof.Checker{Resolver: &fakeResolver{}, Fetcher: &tt.fetch}
			checkErr(t, c.CheckWellKnown(context.Background(), kitID, tt.domain, challenge), tt.wantErr)
			if _, ok := domainproof.NormalizeDomain(tt.domain); !ok && len(tt.fetch.asked) > 0 {
				t.Errorf("fetched %q for an invalid domain", tt.fetch.asked)
			}
		})
	}
}

func TestCheckWellKnownFetchesTheProofURLWithA4KiBLimit(t *testing.T) {
	t.Parallel()
	f := &fakeFetcher{status: 200, body: `{"kitId":"` + kitID + `","token":"` + challenge + `"}`}
	c := &domainproof.Checker{Resolver: &fakeResolver{}, Fetcher: f}
	if err := c.CheckWellKnown(context.Background(), kitID, "Kit.Example.com", challenge); err != nil {
		t.Fatal(err)
	}
	want := "https://kit.example.com/.well-known/kit-verification.json"
	if len(f.asked) != 1 || f.asked[0] != want || f.max != 4096 {
		t.Errorf("fetched %q with max %d, want [%s] with max 4096", f.asked, f.max, want)
	}
}

// checkErr wants nil when want is nil; otherwise an error that wraps both
// ErrProofNotFound and want.
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("err = %v, want nil", err)
	case want != nil && !errors.Is(err, domainproof.ErrProofNotFound):
		t.Errorf("err = %v, want one wrapping ErrProofNotFound", err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("err = %v, want one wrapping %v", err, want)
	}
}

// padded returns the JSON object obj grown to n bytes with an extra key.
func padded(obj string, n int) string {
	head := obj[:len(obj)-1] + `,"pad":"`
	return head + strings.Repeat("x", n-len(head)-2) + `"}`
}
