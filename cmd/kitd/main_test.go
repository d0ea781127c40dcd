package main

import (
	"strings"
	"testing"

	"github.com/kitd/kitd/persistence"
)

func TestGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current int
		env     string
		want    int
	}{
		{"the WAL syncer's P is added to the CPUs", 2, "", 2 + persistence.SyncerProcs},
		{"on one CPU too", 1, "", 1 + persistence.SyncerProcs},
		{"an operator's GOMAXPROCS is kept", 3, "3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gomaxprocs(tc.current, tc.env); got != tc.want {
				t.Fatalf("gomaxprocs(%d, %q) = %d, want %d", tc.current, tc.env, got, tc.want)
			}
		})
	}
}

// The membership flags are refused without the gossip address they
// belong to, never ignored; naming the node is allowed.
func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		rule string
		args []string
		ok   bool
	}{
		{"--join without --cluster-bind is refused", []string{"--join", "127.0.0.1:7946"}, false},
		{"--cluster-key without --cluster-bind is refused", []string{"--cluster-key", "0123456789abcdef"}, false},
		{"--peer-listen without --cluster-bind is refused", []string{"--peer-listen", "127.0.0.1:0"}, false},
		{"--cluster-bind without --cluster-key is refused", []string{"--cluster-bind", "127.0.0.1:7946"}, false},
		{"--cluster-bind with --cluster-key founds a cluster", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef"}, true},
		{"--join joins one", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef", "--join", "127.0.0.1:7947"}, true},
		{"--peer-advertise without --cluster-bind is refused", []string{"--peer-advertise", "10.0.0.1:7947"}, false},
		{"--peer-advertise without a port is refused", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef", "--peer-advertise", "10.0.0.1"}, false},
		{"--peer-advertise with port 0 is refused", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef", "--peer-advertise", "10.0.0.1:0"}, false},
		{"--peer-advertise without a host is refused", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef", "--peer-advertise", ":7947"}, false},
		{"--peer-advertise host:port is taken", []string{"--cluster-bind", "127.0.0.1:7946", "--cluster-key", "0123456789abcdef", "--peer-advertise", "kitd-1.internal:7947"}, true},
		{"--node-name is taken", []string{"--node-name", "n1"}, true},
		{"--down-timeout takes a duration", []string{"--down-timeout", "5s"}, true},
		{"--down-timeout below a second is refused", []string{"--down-timeout", "500ms"}, false},
		{"--down-timeout that is not a duration is refused", []string{"--down-timeout", "5"}, false},
		{"--forget-after takes a duration", []string{"--forget-after", "2s"}, true},
		{"--forget-after below a second is refused", []string{"--forget-after", "500ms"}, false},
		{"--forget-after that is not a duration is refused", []string{"--forget-after", "5"}, false},
		{"--replicas takes a count", []string{"--replicas", "3"}, true},
		{"--replicas below 0 is refused", []string{"--replicas", "-1"}, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			if (err == nil) != tc.ok {
				t.Fatalf("parseFlags(%q) = %v, want ok %v", tc.args, err, tc.ok)
			}
		})
	}
}

// The edge flags of OPERATIONS.md section 8: the TLS pair goes together,
// and --trusted-proxies takes CIDRs or addresses only; a refusal names
// its flag.
func TestEdgeFlags(t *testing.T) {
	for _, tc := range []struct {
		rule string
		args []string
		flag string // "" when taken; else the flag the error names
	}{
		{"--tls-cert without --tls-key is refused", []string{"--tls-cert", "c.pem"}, "--tls-key"},
		{"--tls-key without --tls-cert is refused", []string{"--tls-key", "k.pem"}, "--tls-cert"},
		{"--tls-cert with --tls-key is taken", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, ""},
		{"--trusted-proxies takes CIDRs", []string{"--trusted-proxies", "10.0.0.0/8,2001:db8::/32"}, ""},
		{"--trusted-proxies takes a bare address", []string{"--trusted-proxies", "192.0.2.1"}, ""},
		{"--trusted-proxies refuses what is not a CIDR", []string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, "--trusted-proxies"},
		{"--trusted-proxies refuses a prefix too long", []string{"--trusted-proxies", "10.0.0.0/40"}, "--trusted-proxies"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			switch {
			case tc.flag == "" && err != nil:
				t.Fatalf("parseFlags(%q) = %v, want taken", tc.args, err)
			case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
				t.Fatalf("parseFlags(%q) = %v, want an error naming %s", tc.args, err, tc.flag)
			}
		})
	}
}

// The edge flags' environment variables (OPERATIONS.md section 8) stand
// in for them.
func TestEdgeFlagsFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		env     map[string]string
		ok      bool
		proxies int // how many CIDRs are trusted
	}{
		{"KIT_TLS_CERT alone is refused", map[string]string{"KIT_TLS_CERT": "c.pem"}, false, 0},
		{"KIT_TLS_CERT with KIT_TLS_KEY is taken", map[string]string{"KIT_TLS_CERT": "c.pem", "KIT_TLS_KEY": "k.pem"}, true, 0},
		{"KIT_TRUSTED_PROXIES is taken", map[string]string{"KIT_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1"}, true, 2},
		{"a bad KIT_TRUSTED_PROXIES is refused", map[string]string{"KIT_TRUSTED_PROXIES": "10.0.0.0/99"}, false, 0},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := parseFlags(nil)
			if (err == nil) != tc.ok {
				t.Fatalf("parseFlags with %v = %v, want ok %v", tc.env, err, tc.ok)
			}
			if err == nil && (c.tlsCert != tc.env["KIT_TLS_CERT"] || c.tlsKey != tc.env["KIT_TLS_KEY"] || c.proxies.Len() != tc.proxies) {
				t.Fatalf("config %+v does not hold %v", c, tc.env)
			}
		})
	}
}

// --cache-bytes (KIT_CACHE_BYTES) takes bytes or KiB, MiB, GiB; 0 keeps
// no history in memory; anything else is refused, never guessed.
func TestCacheBytesFlag(t *testing.T) {
	for _, tc := range []struct {
		rule string
		args []string
		want int64
		ok   bool
	}{
		{"the default is 256 MiB", nil, 256 << 20, true},
		{"a number is bytes", []string{"--cache-bytes", "1000"}, 1000, true},
		{"KiB, MiB and GiB are powers of 1024", []string{"--cache-bytes", "3GiB"}, 3 << 30, true},
		{"MiB", []string{"--cache-bytes", "64MiB"}, 64 << 20, true},
		{"0 keeps nothing", []string{"--cache-bytes", "0"}, 0, true},
		{"a negative size is refused", []string{"--cache-bytes", "-1"}, 0, false},
		{"an unknown unit is refused", []string{"--cache-bytes", "1GB"}, 0, false},
		{"a fraction is refused", []string{"--cache-bytes", "1.5GiB"}, 0, false},
		{"a size past int64 is refused", []string{"--cache-bytes", "9999999999GiB"}, 0, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c, err := parseFlags(tc.args)
			if (err == nil) != tc.ok || (tc.ok && c.cacheBytes != tc.want) {
				t.Fatalf("parseFlags(%q) = %d, %v; want %d, ok %v", tc.args, c.cacheBytes, err, tc.want, tc.ok)
			}
		})
	}
}
