package main

import (
	"strings"
	"testing"
)

// A word that is not a flag ends Go's flag parsing: everything after it,
// flags included, was silently dropped. `kitd serve ./d --listen X` then
// served ./data on 127.0.0.1:8080.
func TestAStrayArgumentIsRefused(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{
		{"/srv/kitd-data", "--listen", "127.0.0.1:0"},
		{"--listen", "127.0.0.1:0", "stray"},
	} {
		c, err := parseFlagsEnv(args, noEnv, nil)
		if err == nil {
			t.Errorf("parseFlags(%q) = nil error (listen %q, data %q): a stray argument must be refused", args, c.listen, c.dataDir)
		}
	}
}

// Addresses and the cluster key are checked where the other flags are,
// before anything touches --data, with an error that names the flag and
// never the key.
func TestAddressesAndTheClusterKeyAreCheckedWhenRead(t *testing.T) {
	const key = "SHORTSECRET" // 11 bytes: cluster/peer.MinClusterKey is 16
	long := "0123456789abcdef0123"
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--cluster-bind", "127.0.0.1:0", "--cluster-key", key}, "--cluster-key"},
		{[]string{"--cluster-bind", "bogus", "--cluster-key", long}, "--cluster-bind"},
		{[]string{"--cluster-bind", "127.0.0.1:0", "--cluster-key", long, "--join", "nonsense"}, "--join"},
		{[]string{"--cluster-bind", "127.0.0.1:0", "--cluster-key", long, "--peer-listen", "nonsense"}, "--peer-listen"},
		{[]string{"--listen", "bogus"}, "--listen"},
		{[]string{"--public-url", "kit.example.com"}, "--public-url"},
		{[]string{"--public-url", "notaurl"}, "--public-url"},
		{[]string{"--public-url", "https://kit.example.com:99999"}, "--public-url"}, // a port past 65535
		{[]string{"--public-url", "https://kit.example.com:0"}, "--public-url"},
		{[]string{"--public-url", "http://:8080"}, "--public-url"}, // a port and no host
		{[]string{"--verify-dns", "bogus"}, "--verify-dns"},
		{[]string{"--verify-dns", "127.0.0.1:0"}, "--verify-dns"},
		{[]string{"--delivery-allow", "a b"}, "--delivery-allow"},
		{[]string{"--delivery-allow", "kit.test:99999"}, "--delivery-allow"},
		{[]string{"--delivery-allow", "https://kit.test"}, "--delivery-allow"}, // a URL, not a host
		{[]string{"--delivery-allow", "kit.test:"}, "--delivery-allow"},
	} {
		_, err := parseFlagsEnv(tc.args, noEnv, nil)
		switch {
		case err == nil:
			t.Errorf("parseFlags(%q) accepted it", tc.args)
		case !strings.Contains(err.Error(), tc.flag):
			t.Errorf("parseFlags(%q) = %v: should name %s", tc.args, err, tc.flag)
		case strings.Contains(err.Error(), key):
			t.Errorf("parseFlags(%q) = %v: echoes the cluster key", tc.args, err)
		}
	}
}

// The same for restore: with KIT_DATA_DIR set, a stray word before
// --data had the backup restored into KIT_DATA_DIR instead.
func TestRestoreRefusesAStrayArgument(t *testing.T) {
	env, given := t.TempDir()+"/env-dir", t.TempDir()+"/given-dir"
	t.Setenv("KIT_DATA_DIR", env)
	err := restore([]string{"--from", "/nonexistent-backup", "stray", "--data", given}, strings.NewReader(""), new(strings.Builder))
	if err == nil || !strings.Contains(err.Error(), "stray") && !strings.Contains(err.Error(), "argument") {
		t.Fatalf("restore with a stray argument = %v: want it refused as such (not a later error about %s)", err, env)
	}
}

// --delivery-allow names what deliveries compare with an endpoint URL's
// authority: a host, or a host and a port, never a URL.
func TestDeliveryAllowTakesHostsAndHostPorts(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"kit.test", true},
		{"127.0.0.1:8443", true},
		{"[::1]:8443", true},
		{"[::1]", true},
		// An IPv6 host as deliveries match it (url.Hostname): "::1" let
		// https://[::1]:8443 through, and kitd refused to start with it.
		{"::1", true},
		{"fe80::1", true},
		{"a b", false},
		{"kit.test:", false},
		{"kit.test:0", false},
		{"https://kit.test", false},
		{"kit.test/path", false},
		{"user@kit.test", false},
	} {
		if got := hostOrHostPort(tc.entry); got != tc.ok {
			t.Errorf("hostOrHostPort(%q) = %v, want %v", tc.entry, got, tc.ok)
		}
	}
}
