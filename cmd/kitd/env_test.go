package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// lookupOf is an environment of vars alone.
func lookupOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// flagVariables: each flag of kitd serve, its variable, a value for it
// and the flag's value that results ("" when it is the value itself).
var flagVariables = []struct{ flag, env, value, want string }{
	{"listen", "KIT_LISTEN", "127.0.0.1:9", ""},
	{"data", "KIT_DATA_DIR", "/tmp/d", ""},
	{"public-url", "KIT_PUBLIC_URL", "https://kit.example", ""},
	{"operator-token", "KIT_OPERATOR_TOKEN", "op", ""},
	{"test-clock", "KIT_TEST_CLOCK", "1", "true"},
	{"limits", "KIT_LIMITS", "off", ""},
	{"node-name", "KIT_NODE_NAME", "n1", ""},
	{"cluster-bind", "KIT_CLUSTER_BIND", "127.0.0.1:7946", ""},
	{"join", "KIT_JOIN", "127.0.0.1:7947", ""},
	{"cluster-key", "KIT_CLUSTER_KEY", "0123456789abcdef", ""},
	{"peer-listen", "KIT_PEER_LISTEN", "127.0.0.1:0", ""},
	{"down-timeout", "KIT_DOWN_TIMEOUT", "9s", ""},
	{"forget-after", "KIT_FORGET_AFTER", "8s", ""},
	{"peer-advertise", "KIT_PEER_ADVERTISE", "10.0.0.1:7947", ""},
	{"replicas", "KIT_REPLICAS", "5", ""},
	{"replicate", "KIT_REPLICATE", "true", ""},
	{"demo", "KIT_DEMO", "1", "true"},
	{"log-level", "KIT_LOG_LEVEL", "warn", ""},
	{"log-format", "KIT_LOG_FORMAT", "text", ""},
	{"pprof", "KIT_PPROF", "127.0.0.1:6060", ""},
	{"metrics-token", "KIT_METRICS_TOKEN", "scrape", ""},
	{"verify-dns", "KIT_VERIFY_DNS", "127.0.0.1:53", ""},
	{"verify-resolve", "KIT_VERIFY_RESOLVE", "a.example:443=127.0.0.1:8443, b.example:443=127.0.0.1:9443", "a.example:443=127.0.0.1:8443,b.example:443=127.0.0.1:9443"},
	{"verify-ca", "KIT_VERIFY_CA", "/tmp/ca.pem", ""},
	{"delivery-allow", "KIT_DELIVERY_ALLOW", "127.0.0.1", ""},
	{"delivery-ca", "KIT_DELIVERY_CA", "/tmp/ca.pem", ""},
	{"delivery-timeout", "KIT_DELIVERY_TIMEOUT", "500ms", ""},
	{"delivery-queue", "KIT_DELIVERY_QUEUE", "64", ""},
	{"delivery-memory", "KIT_DELIVERY_MEMORY", "64MiB", ""},
	{"tls-cert", "KIT_TLS_CERT", "/tmp/cert.pem", ""},
	{"tls-key", "KIT_TLS_KEY", "/tmp/key.pem", ""},
	{"trusted-proxies", "KIT_TRUSTED_PROXIES", "10.0.0.0/8,192.0.2.1", ""},
	{"cache-bytes", "KIT_CACHE_BYTES", "64MiB", ""},
}

// Every flag has its environment variable (OPERATIONS.md sections 1, 6, 7
// and 8): set alone, the variable is the flag's value.
func TestEveryFlagHasItsVariable(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := flagVariables
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.flag] = true
		t.Run(r.env+" sets --"+r.flag, func(t *testing.T) {
			vars := map[string]string{r.env: r.value}
			if strings.HasPrefix(r.env, "KIT_CLUSTER_") || r.env == "KIT_JOIN" || strings.HasPrefix(r.env, "KIT_PEER_") {
				// The membership flags need the gossip address and the key.
				vars["KIT_CLUSTER_BIND"], vars["KIT_CLUSTER_KEY"] = "127.0.0.1:7946", "0123456789abcdef"
				vars[r.env] = r.value
			}
			if strings.HasPrefix(r.env, "KIT_TLS_") {
				// The TLS pair goes together.
				vars["KIT_TLS_CERT"], vars["KIT_TLS_KEY"] = "/tmp/cert.pem", "/tmp/key.pem"
				vars[r.env] = r.value
			}
			var fs *flag.FlagSet
			_, err := parseFlagsEnv(nil, lookupOf(vars), func(f *flag.FlagSet) { fs = f })
			if err != nil {
				t.Fatal(err)
			}
			want := r.want
			if want == "" {
				want = r.value
			}
			if got := fs.Lookup(r.flag).Value.String(); got != want {
				t.Fatalf("--%s = %q, want %q", r.flag, got, want)
			}
		})
	}
	var fs *flag.FlagSet
	_, _ = parseFlagsEnv(nil, lookupOf(nil), func(f *flag.FlagSet) { fs = f })
	fs.VisitAll(func(f *flag.Flag) {
		if !covered[f.Name] {
			t.Errorf("--%s has no row here: which variable sets it?", f.Name)
		}
	})
}

// README.md "Running it" gives the flags, OPERATIONS.md being kept outside
// the repository: a user must find every variable there, or a variable
// kitd reads (KIT_VERIFY_DNS, KIT_LISTEN) would be known to its code only.
func TestEveryVariableIsInTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range flagVariables {
		if !strings.Contains(string(readme), "`"+r.env+"`") {
			t.Errorf("README.md does not name %s, the variable of --%s", r.env, r.flag)
		}
	}
}

// The rules of the variables' values: booleans, secrets from files, and
// the loopback-only --pprof.
func TestEnvironmentRules(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := file("token", "op-from-file\n")
	crlf := file("crlf", "key-from-file-of-16+\r\n")
	empty := file("empty", "")
	twoNewlines := file("two-newlines", "op-from-file\n\n")
	for _, tc := range []struct {
		rule string
		args []string
		vars map[string]string
		// check reads the config; err is a substring of the error ("" for none).
		check func(config) bool
		err   string
	}{
		{"a boolean variable takes 1", nil, map[string]string{"KIT_TEST_CLOCK": "1"}, func(c config) bool { return c.testClock }, ""},
		{"a boolean variable takes true", nil, map[string]string{"KIT_REPLICATE": "true"}, func(c config) bool { return c.replicate }, ""},
		{"a boolean variable takes 0", nil, map[string]string{"KIT_DEMO": "0"}, func(c config) bool { return !c.demo }, ""},
		{"a boolean variable takes false", nil, map[string]string{"KIT_TEST_CLOCK": "false"}, func(c config) bool { return !c.testClock }, ""},
		{"a boolean variable refuses anything else, naming it", nil, map[string]string{"KIT_DEMO": "yes"}, nil, "KIT_DEMO must be 1, 0, true or false"},
		{"a boolean flag wins over its variable", []string{"--demo=false"}, map[string]string{"KIT_DEMO": "1"}, func(c config) bool { return !c.demo }, ""},
		{"KIT_OPERATOR_TOKEN_FILE is read, its newline trimmed", nil, map[string]string{"KIT_OPERATOR_TOKEN_FILE": token}, func(c config) bool { return c.operatorToken == "op-from-file" }, ""},
		{"KIT_CLUSTER_KEY_FILE is read, a CRLF trimmed", []string{"--cluster-bind", "127.0.0.1:7946"}, map[string]string{"KIT_CLUSTER_KEY_FILE": crlf}, func(c config) bool { return c.clusterKey == "key-from-file-of-16+" }, ""},
		{"KIT_METRICS_TOKEN_FILE is read", nil, map[string]string{"KIT_METRICS_TOKEN_FILE": token}, func(c config) bool { return c.metricsToken == "op-from-file" }, ""},
		{"a variable and its _FILE together are refused", nil, map[string]string{"KIT_METRICS_TOKEN": "x", "KIT_METRICS_TOKEN_FILE": token}, nil, "KIT_METRICS_TOKEN and KIT_METRICS_TOKEN_FILE are both set"},
		{"an unreadable _FILE is refused, naming the variable", nil, map[string]string{"KIT_OPERATOR_TOKEN_FILE": filepath.Join(dir, "absent")}, nil, "KIT_OPERATOR_TOKEN_FILE: cannot read"},
		{"an empty _FILE is refused", nil, map[string]string{"KIT_CLUSTER_KEY_FILE": empty}, nil, "KIT_CLUSTER_KEY_FILE"},
		{"an --operator-token with a space at its end is refused: no header carries it", []string{"--operator-token", "op-from-flag "}, nil, nil, "--operator-token"},
		{"a KIT_OPERATOR_TOKEN_FILE left with a newline is refused", nil, map[string]string{"KIT_OPERATOR_TOKEN_FILE": twoNewlines}, nil, "--operator-token"},
		{"a KIT_METRICS_TOKEN of spaces is refused", nil, map[string]string{"KIT_METRICS_TOKEN": "   "}, nil, "--metrics-token"},
		{"an --operator-token with a control character is refused", []string{"--operator-token", "op-from\x01flag"}, nil, nil, "--operator-token"},
		{"a flag wins over a secret's file", []string{"--operator-token", "op-flag"}, map[string]string{"KIT_OPERATOR_TOKEN_FILE": token}, func(c config) bool { return c.operatorToken == "op-flag" }, ""},
		{"KIT_VERIFY_RESOLVE is a comma-separated list", nil, map[string]string{"KIT_VERIFY_RESOLVE": "a:443=127.0.0.1:1,b:443=127.0.0.1:2"}, func(c config) bool { return len(c.verifyResolve) == 2 }, ""},
		{"--pprof takes 127.0.0.1", []string{"--pprof", "127.0.0.1:6060"}, nil, func(c config) bool { return true }, ""},
		{"--pprof takes [::1]", []string{"--pprof", "[::1]:6060"}, nil, func(c config) bool { return true }, ""},
		{"--pprof takes localhost", []string{"--pprof", "localhost:6060"}, nil, func(c config) bool { return true }, ""},
		{"--pprof refuses every interface", []string{"--pprof", ":6060"}, nil, nil, "--pprof must be a loopback address"},
		{"--pprof refuses 0.0.0.0", []string{"--pprof", "0.0.0.0:6060"}, nil, nil, "--pprof must be a loopback address"},
		{"--pprof refuses a public address", []string{"--pprof", "192.0.2.1:6060"}, nil, nil, "--pprof must be a loopback address"},
		{"KIT_PPROF refuses a name other than localhost", nil, map[string]string{"KIT_PPROF": "kitd.example:6060"}, nil, "--pprof must be a loopback address"},
		{"--log-format defaults to the terminal's choice", nil, nil, func(c config) bool { return c.logFormat == "" }, ""},
		{"--delivery-timeout defaults to the contract's 3 s", nil, nil, func(c config) bool { return c.deliveryTimeout == 3*time.Second }, ""},
		{"--delivery-timeout takes a shorter one for tests", []string{"--delivery-timeout", "250ms"}, nil, func(c config) bool { return c.deliveryTimeout == 250*time.Millisecond }, ""},
		{"--delivery-timeout refuses 0", []string{"--delivery-timeout", "0s"}, nil, nil, "--delivery-timeout must be more than 0"},
		{"--delivery-queue defaults to 10,000 events an installation", nil, nil, func(c config) bool { return c.deliveryQueue == 10_000 }, ""},
		{"--delivery-queue refuses fewer than twice the events in flight", []string{"--delivery-queue", "19"}, nil, nil, "--delivery-queue must be at least 20"},
		{"--delivery-queue refuses what is not a number", []string{"--delivery-queue", "lots"}, nil, nil, "--delivery-queue: "},
		{"--delivery-memory defaults to 128 MiB for the node", nil, nil, func(c config) bool { return c.deliveryMemory == 128<<20 }, ""},
		{"--delivery-memory takes a size", []string{"--delivery-memory", "1GiB"}, nil, func(c config) bool { return c.deliveryMemory == 1<<30 }, ""},
		{"--delivery-memory refuses less than 1 MiB", []string{"--delivery-memory", "1000KiB"}, nil, nil, "--delivery-memory must be at least 1MiB"},
		{"--delivery-memory refuses what is not a size", []string{"--delivery-memory", "much"}, nil, nil, "--delivery-memory: "},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c, err := parseFlagsEnv(tc.args, lookupOf(tc.vars), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "from-file") {
					t.Fatalf("error %q shows a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("config %+v breaks the rule", c)
			}
		})
	}
}

// The usage kitd prints on a bad flag never shows a secret the
// environment gave, from a variable or a file.
func TestUsageShowsNoSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("key-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"KIT_OPERATOR_TOKEN": "op-from-the-env", "KIT_CLUSTER_KEY_FILE": file, "KIT_METRICS_TOKEN": "scrape-from-the-env"}
	var fs *flag.FlagSet
	_, err := parseFlagsEnv([]string{"--no-such-flag"}, lookupOf(vars), func(f *flag.FlagSet) { fs = f })
	if err == nil {
		t.Fatal("an unknown flag was taken")
	}
	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.PrintDefaults()
	for _, secret := range []string{"op-from-the-env", "key-from-a-file", "scrape-from-the-env"} {
		if strings.Contains(usage.String(), secret) {
			t.Errorf("usage shows %q:\n%s", secret, usage.String())
		}
	}
}

// On a terminal the log is text, else JSON (a file, a pipe).
func TestDefaultLogFormat(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := defaultLogFormat(f); got != "json" {
		t.Errorf("a file: %q, want json", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := defaultLogFormat(w); got != "json" {
		t.Errorf("a pipe: %q, want json", got)
	}
	// /dev/null is a character device, as a terminal is.
	if tty, err := os.OpenFile("/dev/null", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if got := defaultLogFormat(tty); got != "text" {
			t.Errorf("a character device: %q, want text", got)
		}
	}
}

// kitd version reads the VCS stamp: the revision, whether the tree was
// modified, the main module's version unless -X set one.
func TestBuildOf(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127-64fd7190abcd"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "64fd7190abcd"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		rule                  string
		info                  *debug.BuildInfo
		ok                    bool
		ldflags               string
		wantVersion, wantComm string
	}{
		{"the commit and its modification come from the VCS stamp", stamped, true, "", "v0.0.0-20261127-64fd7190abcd", "64fd7190abcd+modified"},
		{"-X main.version wins over the module's version", stamped, true, "1.4.0", "1.4.0", "64fd7190abcd+modified"},
		{"a clean tree's commit is the revision alone", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true, "", "dev", "abc"},
		{"without a stamp the commit is unknown", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "", "(devel)", "unknown"},
		{"without build info the version is dev", nil, false, "", "dev", "unknown"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			old := version
			version = tc.ldflags
			defer func() { version = old }()
			b := buildOf(tc.info, tc.ok)
			if b.version != tc.wantVersion || b.commitLabel() != tc.wantComm || !strings.HasPrefix(b.goVersion, "go") {
				t.Fatalf("%+v, want version %q commit %q", b, tc.wantVersion, tc.wantComm)
			}
			// A backup's header records the same two facts on one line.
			if got := b.String(); got != tc.wantVersion+" "+tc.wantComm {
				t.Fatalf("String() = %q, want %q", got, tc.wantVersion+" "+tc.wantComm)
			}
		})
	}
}
