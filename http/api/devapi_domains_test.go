package api

import "testing"

func TestDevInstallOrigin(t *testing.T) {
	tests := []struct {
		name, url, want string // want "" = refused
	}{
		{"an https URL gives its origin", "https://abc.tunnel.example/x?y=1#z", "https://abc.tunnel.example"},
		{"the port is part of the origin", "https://abc.tunnel.example:8443/", "https://abc.tunnel.example:8443"},
		{"an IPv6 literal host", "https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443"},
		{"http is refused", "http://abc.tunnel.example", ""},
		{"no scheme is refused", "abc.tunnel.example", ""},
		{"no host is refused", "https:///path", ""},
		{"a port without a host is refused", "https://:8443/", ""},
		{"user information is refused", "https://u:p@abc.tunnel.example", ""},
		{"an opaque URL is refused", "https:abc.tunnel.example", ""},
		{"a malformed URL is refused", "https://abc.tunnel.example:port", ""},
		{"a port past 65535 is refused", "https://abc.tunnel.example:99999", ""},
		{"port 0 is refused", "https://abc.tunnel.example:0", ""},
		{"an empty port is refused", "https://abc.tunnel.example:", ""},
		// The manifest's host rule (docs/manifest.md "URLs"): a host the
		// rebased endpoint URLs could not carry is refused at url, not
		// later at a manifest field the developer wrote correctly.
		{"a host with an underscore is refused", "https://abc_def.tunnel.example", ""},
		{"a host with an empty label is refused", "https://abc..tunnel.example", ""},
		{"a host with a trailing dot is refused", "https://abc.tunnel.example.", ""},
		{"a label starting with a hyphen is refused", "https://-abc.tunnel.example", ""},
		{"an IPv6 zone is refused", "https://[fe80::1%25eth0]:8443", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := devInstallOrigin(tc.url)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("devInstallOrigin(%q) = %v, want refused", tc.url, got)
			case tc.want != "" && err != nil:
				t.Fatalf("devInstallOrigin(%q): %v", tc.url, err)
			case tc.want != "" && got.String() != tc.want:
				t.Fatalf("devInstallOrigin(%q) = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}
