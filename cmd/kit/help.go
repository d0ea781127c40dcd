package main

import (
	"fmt"
	"io"
	"strings"
)

func isHelp(a string) bool {
	return a == "help" || a == "-h" || a == "-help" || a == "--help"
}

// help answers 'kit help [COMMAND]': a command's help, a group's commands
// (kit help domains), or the whole list; a word that names none is a
// usage error, as it is without help.
func help(e *env, args []string) int {
	if len(args) > 1 {
		if cmd, rest := lookup(args[1:]); cmd != nil && len(rest) == 0 {
			writeCommandHelp(e.stdout, cmd)
			return 0
		}
		if subs := subcommands(args[1]); len(subs) > 0 && len(args) == 2 {
			for _, sub := range subs {
				cmd, _ := lookup([]string{args[1], sub})
				fmt.Fprintf(e.stdout, "  %s\n      %s\n", cmd.usage(), cmd.summary)
			}
			fmt.Fprintf(e.stdout, "\nRun 'kit help %s COMMAND' for a command's flags.\n", clean(args[1]))
			return 0
		}
		fmt.Fprintf(e.stderr, "kit: no help for %q: no such command; 'kit help' lists the commands\n", strings.Join(args[1:], " "))
		return 2
	}
	writeHelp(e.stdout)
	return 0
}

func writeHelp(w io.Writer) {
	fmt.Fprint(w, `kit: the Kit developer's command-line tool (the developer API, docs/openapi/devapi.json).

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n      %s\n", c.usage(), c.summary)
	}
	fmt.Fprint(w, `
KIT is a Kit id or the slug of one of the workspace's Kits. FILE - reads
standard input. Every command takes --json: the API's answer as JSON.

Environment:
  KIT_DEV_TOKEN  the developer token (kdev_...), from the developer portal
  KIT_API_URL    the API base ({base_url}): the server's public URL followed
                 by /api/v1, e.g. http://127.0.0.1:8080/api/v1 for
                 kitd serve --public-url http://127.0.0.1:8080. An origin
                 without a path gets /api/v1 added.
                 Default: `+defaultAPIURL+`

Exit status: 0 done; 1 an error answer, no answer, or an invalid manifest;
2 a usage error. Run 'kit help COMMAND' for a command's flags.
`)
}

func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s.\n\nFlags:\n", c.usage(), c.summary)
	fs := newFlagSet(&env{}, c.name)
	c.setup(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nRun 'kit help' for the environment variables.")
}
