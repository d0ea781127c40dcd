package kitverify

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const (
	secretA = "kss_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	secretB = "kss_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
)

func TestVerify(t *testing.T) {
	at := time.Unix(1767225600, 0)
	body := []byte(`{"eventId":"e","sequence":1}`)
	for _, tc := range []struct {
		name    string
		header  string
		body    []byte
		now     time.Time
		secrets []string
		want    error
	}{
		{"a signature with the secret verifies", Sign(at, body, secretA), body, at, []string{secretA}, nil},
		{"the previous secret verifies during a rotation", Sign(at, body, secretA), body, at, []string{secretB, secretA}, nil},
		{"a header with one v1 per secret verifies with either", Sign(at, body, secretB, secretA), body, at, []string{secretA}, nil},
		{"299 seconds old verifies", Sign(at, body, secretA), body, at.Add(299 * time.Second), []string{secretA}, nil},
		{"300 seconds old verifies", Sign(at, body, secretA), body, at.Add(Tolerance), []string{secretA}, nil},
		{"301 seconds old is refused", Sign(at, body, secretA), body, at.Add(301 * time.Second), []string{secretA}, ErrExpired},
		{"301 seconds in the future is refused", Sign(at, body, secretA), body, at.Add(-301 * time.Second), []string{secretA}, ErrExpired},
		{"another body is refused", Sign(at, body, secretA), []byte(`{"eventId":"e","sequence":2}`), at, []string{secretA}, ErrMismatch},
		{"another secret is refused", Sign(at, body, secretA), body, at, []string{secretB}, ErrMismatch},
		{"the secret without its kss_ prefix is refused", Sign(at, body, strings.TrimPrefix(secretA, "kss_")), body, at, []string{secretA}, ErrMismatch},
		{"another time with the same v1 is refused", strings.Replace(Sign(at, body, secretA), "t=1767225600", "t=1767225601", 1), body, at, []string{secretA}, ErrMismatch},
		{"no secrets refuse everything", Sign(at, body, secretA), body, at, nil, ErrMismatch},
		{"an empty previous secret verifies nothing: anyone has the empty key", Sign(at, body, ""), body, at, []string{secretA, ""}, ErrMismatch},
		{"an empty secret alone verifies nothing", Sign(at, body, ""), body, at, []string{""}, ErrMismatch},
		{"the current secret verifies beside an empty previous one", Sign(at, body, secretA), body, at, []string{secretA, ""}, nil},
		{"an empty header is malformed", "", body, at, []string{secretA}, ErrMalformed},
		{"a header without t is malformed", "v1=" + strings.Repeat("00", 32), body, at, []string{secretA}, ErrMalformed},
		{"a header without v1 is malformed", "t=1767225600", body, at, []string{secretA}, ErrMalformed},
		{"a v1 that is not hex is malformed", "t=1767225600,v1=zz", body, at, []string{secretA}, ErrMalformed},
		{"a short v1 is malformed", "t=1767225600,v1=00", body, at, []string{secretA}, ErrMalformed},
		{"a t that is not a number is malformed", "t=-5,v1=" + strings.Repeat("00", 32), body, at, []string{secretA}, ErrMalformed},
		{"two t are malformed", "t=1,t=2,v1=" + strings.Repeat("00", 32), body, at, []string{secretA}, ErrMalformed},
		{"unknown schemes beside v1 are ignored", Sign(at, body, secretA) + ",v0=abc", body, at, []string{secretA}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(tc.header, tc.body, tc.now, tc.secrets...); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// The worked example of docs/deliveries.md is what Sign computes, so that
// a Kit written in another language can test its own check against it.
func TestWorkedExampleOfTheDocs(t *testing.T) {
	const (
		secret = "kss_5tX0bNfUjv3qT0oN6mGZb7yQ9cW2eR4hK8aL1sD3fG5"
		unix   = 1767225600
		body   = `{"eventId":"0194f3a2-6b1c-7d2e-8f30-4a5b6c7d8e9f","sequence":1,"type":"message.posted","installationId":"0194f3a2-0000-7000-8000-000000000001","occurredAt":"2026-01-01T00:00:00Z","data":{"message":{"id":"0194f3a2-0000-7000-8000-000000000002","text":"hello"}}}`
	)
	header := Sign(time.Unix(unix, 0), []byte(body), secret)
	doc, err := os.ReadFile("../docs/deliveries.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{secret, body, "Service-Signature: " + header} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/deliveries.md lacks %q", want)
		}
	}
	if err := Verify(header, []byte(body), time.Unix(unix, 0), secret); err != nil {
		t.Fatal(err)
	}
}
