package deliveries

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/kitverify"
)

func TestCallRules(t *testing.T) {
	const secret = "kss_test-secret"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := kitverify.Verify(r.Header.Get(kitverify.Header), body, time.Now(), secret); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Service-Installation-Id") != "inst-1" {
			http.Error(w, "no installation id", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"text":"done"}`))
		case "/fail":
			http.Error(w, "no", http.StatusInternalServerError)
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/huge":
			w.Write([]byte(strings.Repeat("x", MaxAnswer+1)))
		}
	}))
	defer srv.Close()
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	s := New(Config{Clock: clock.System(), RootCAs: roots, Allow: []string{"127.0.0.1"}})
	refusing := New(Config{Clock: clock.System(), RootCAs: roots})

	for _, tc := range []struct {
		name     string
		s        *Sender
		url      string
		secrets  []string
		wantBody string
		reason   string
		status   int
	}{
		{"a signed 2xx answer is the Kit's answer", s, srv.URL + "/ok", []string{secret}, `{"text":"done"}`, "", 0},
		{"the request is signed with every secret of the overlap", s, srv.URL + "/ok", []string{"kss_other", secret}, `{"text":"done"}`, "", 0},
		{"a 5xx is an http error", s, srv.URL + "/fail", []string{secret}, "", ReasonHTTP, 500},
		{"a wrong signature's refusal is an http error", s, srv.URL + "/ok", []string{"kss_wrong"}, "", ReasonHTTP, 401},
		{"a redirect is not followed: an http error", s, srv.URL + "/redirect", []string{secret}, "", ReasonHTTP, 302},
		{"an answer larger than MaxAnswer is refused", s, srv.URL + "/huge", []string{secret}, "", ReasonHTTP, 200},
		{"plain http is never called", s, strings.Replace(srv.URL, "https:", "http:", 1) + "/ok", []string{secret}, "", ReasonConnection, 0},
		{"a loopback address not allowed is refused", refusing, srv.URL + "/ok", []string{secret}, "", ReasonConnection, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			var a Answer
			if u.Scheme != "https" {
				a, err = tc.s.call(context.Background(), Call{URL: tc.url, InstallationID: "inst-1"})
			} else {
				a, err = tc.s.post(context.Background(), u, Call{URL: tc.url, InstallationID: "inst-1", Body: []byte(`{"type":"command"}`)}, tc.secrets)
			}
			if tc.reason == "" {
				if err != nil || string(a.Body) != tc.wantBody {
					t.Fatalf("answer %q, %v; want %q", a.Body, err, tc.wantBody)
				}
				return
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Reason != tc.reason || ce.Status != tc.status {
				t.Fatalf("error %v, want reason %s status %d", err, tc.reason, tc.status)
			}
		})
	}
}
