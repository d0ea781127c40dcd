// Command kit is the command-line tool of Kit developers: it validates,
// uploads and publishes manifests, shows Kits and their logs, verifies
// domains and installs a Kit into the developer sandbox, all through the
// developer API (docs/api.md "Developer API"). It is a client only: it never reads kitd's
// data or imports the server's packages.
//
// Usage:
//
//	kit manifest validate FILE
//	kit versions upload FILE [--publish]
//	kit versions publish KIT VERSION
//	kit kits list
//	kit kits show KIT
//	kit logs KIT [--source S] [--level L] [--limit N] [--cursor C] [--follow [--interval D]]
//	kit dev-install FILE --url URL
//	kit domains add KIT DOMAIN [--method dns|well_known]
//	kit domains verify KIT DOMAIN
//	kit domains remove KIT DOMAIN
//	kit install-link create KIT
//	kit install-link delete KIT
//	kit deliveries list INSTALLATION [--limit N] [--cursor C]
//	kit deliveries redeliver INSTALLATION (EVENT_ID | --dead-since TIME)
//	kit trigger EVENT_TYPE [--kit KIT]
//	kit me
//	kit help [COMMAND]
//
// KIT is a Kit id or the slug of one of the workspace's Kits; FILE "-" is
// standard input. Every command takes --json to print the API's answer as
// JSON instead of text (`logs --follow --json` prints one entry per line).
//
// Environment: KIT_DEV_TOKEN is the developer token (kdev_...); KIT_API_URL
// is the API base ({base_url} of docs/api.md), e.g. http://127.0.0.1:8080/api/v1
// for `kitd serve --public-url http://127.0.0.1:8080`; an origin without a
// path gets /api/v1 added. Default: http://127.0.0.1:8080/api/v1.
//
// Exit status: 0 done; 1 an error answer, no answer, or an invalid manifest;
// 2 a usage error (unknown command, wrong arguments, no KIT_DEV_TOKEN).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// requestTimeout bounds one API call; the developer API answers in
// milliseconds, so a minute only ends calls to a server that hangs.
const requestTimeout = time.Minute

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		http: &http.Client{Timeout: requestTimeout},
	})
	stop()
	os.Exit(code)
}

// env is what a command may touch of the process, injected so that tests run
// commands in process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	http           *http.Client
	json           bool // --json
}

// command is one `kit` command.
type command struct {
	name       string   // "versions upload", "logs"
	positional []string // names of the positional arguments
	flagsUsage string   // the flags, for the usage line
	summary    string
	// setup defines the command's flags on fs and returns what runs it.
	setup func(fs *flag.FlagSet) runner
}

// runner runs a command with its positional arguments.
type runner func(ctx context.Context, e *env, pos []string) error

// noFlags is the setup of a command with no flags of its own.
func noFlags(r runner) func(*flag.FlagSet) runner {
	return func(*flag.FlagSet) runner { return r }
}

var commands = []command{
	{"manifest validate", []string{"FILE"}, "", "check a manifest; show its problems and consent changes", noFlags(runValidate)},
	{"versions upload", []string{"FILE"}, "[--publish]", "register a manifest version (and publish it)", setupUpload},
	{"versions publish", []string{"KIT", "VERSION"}, "", "publish a registered version", noFlags(runPublish)},
	{"kits list", nil, "", "list the workspace's Kits", noFlags(runKitsList)},
	{"kits show", []string{"KIT"}, "", "show a Kit: versions, domains, credentials, hosts", noFlags(runKitsShow)},
	{"logs", []string{"KIT"}, "[--source S] [--level L] [--limit N] [--cursor C] [--follow [--interval D]]", "show a Kit's developer log, oldest first", setupLogs},
	{"dev-install", []string{"FILE"}, "--url URL", "install a manifest into the developer sandbox behind a tunnel URL", setupDevInstall},
	{"domains add", []string{"KIT", "DOMAIN"}, "[--method dns|well_known]", "add a domain and print the proof to publish", setupDomainsAdd},
	{"domains verify", []string{"KIT", "DOMAIN"}, "", "check a domain's proof", noFlags(runDomainsVerify)},
	{"domains remove", []string{"KIT", "DOMAIN"}, "", "remove a domain", noFlags(runDomainsRemove)},
	{"install-link create", []string{"KIT"}, "", "make the Kit's install link (replacing the old one) and print its URL once", noFlags(runInstallLinkCreate)},
	{"install-link delete", []string{"KIT"}, "", "end the Kit's install link", noFlags(runInstallLinkDelete)},
	{"deliveries list", []string{"INSTALLATION"}, "[--limit N] [--cursor C]", "show an installation's deliveries and its endpoint's health", setupDeliveriesList},
	{"deliveries redeliver", []string{"INSTALLATION", "[EVENT_ID]"}, "[--dead-since TIME]", "send one event again, or every event dead-lettered since TIME", setupRedeliver},
	{"trigger", []string{"EVENT_TYPE"}, "[--kit KIT]", "send a signed test event of that kind to the Kit's dev-install", setupTrigger},
	{"me", nil, "", "show the workspace, member and token of KIT_DEV_TOKEN", noFlags(runMe)},
}

func (c *command) usage() string {
	return strings.Join(slices.DeleteFunc([]string{"kit", c.name, strings.Join(c.positional, " "), c.flagsUsage}, func(s string) bool { return s == "" }), " ")
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errInvalid ends a command whose output already said what is wrong (an
// invalid manifest): exit status 1 without another message.
var errInvalid = errors.New("invalid")

func run(ctx context.Context, args []string, e *env) int {
	cmd, rest := lookup(args)
	if cmd == nil {
		if len(args) == 0 || isHelp(args[0]) {
			return help(e, args)
		}
		if subs := subcommands(args[0]); len(subs) > 0 {
			fmt.Fprintf(e.stderr, "kit: %s needs one of: %s\n", clean(args[0]), strings.Join(subs, ", "))
		} else {
			fmt.Fprintf(e.stderr, "kit: unknown command %q; 'kit help' lists the commands\n", strings.Join(commandWords(args), " "))
		}
		return 2
	}
	fs := newFlagSet(e, cmd.name)
	r := cmd.setup(fs)
	pos, err := parse(fs, rest, cmd.positional...)
	if err == nil {
		err = r(ctx, e, pos)
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		writeCommandHelp(e.stdout, cmd)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "kit: %s\nusage: %s\n", clean(ue.msg), cmd.usage())
		return 2
	case errors.Is(err, errInvalid):
		return 1
	case ctx.Err() != nil:
		fmt.Fprintln(e.stderr, "kit: interrupted")
		return 1
	default:
		fmt.Fprintf(e.stderr, "kit: %s\n", clean(err.Error()))
		return 1
	}
}

// lookup finds the command named by the first one or two words of args.
func lookup(args []string) (*command, []string) {
	for n := 2; n >= 1; n-- {
		if len(args) < n {
			continue
		}
		name := strings.Join(args[:n], " ")
		for i := range commands {
			if commands[i].name == name {
				return &commands[i], args[n:]
			}
		}
	}
	return nil, nil
}

// subcommands lists the commands of a group ("kits": list, show).
func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if g, sub, ok := strings.Cut(c.name, " "); ok && g == group {
			subs = append(subs, sub)
		}
	}
	return subs
}

// commandWords is the leading words of args that are not flags.
func commandWords(args []string) []string {
	var w []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(w) == 2 {
			break
		}
		w = append(w, a)
	}
	return w
}

// newFlagSet starts the flag set of a command: every command takes --json.
func newFlagSet(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kit "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by run
	fs.BoolVar(&e.json, "json", false, "print the API's answer as JSON")
	return fs
}

// parse parses flags anywhere among the arguments (`upload FILE --publish`
// as well as `upload --publish FILE`) and checks the number of positional
// arguments. Everything after "--" is positional.
func parse(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Names in brackets are optional, and last.
	required := len(names)
	for required > 0 && strings.HasPrefix(names[required-1], "[") {
		required--
	}
	switch {
	case len(pos) < required:
		return nil, usagef("missing %s", strings.Join(names[len(pos):required], " "))
	case len(pos) > len(names):
		return nil, usagef("unexpected argument %q", pos[len(names)])
	}
	return pos, nil
}
