package main

import (
	"fmt"
	"io"
)

func isHelp(a string) bool {
	return a == "help" || a == "-h" || a == "-help" || a == "--help"
}

func writeHelp(w io.Writer, args []string) {
	if len(args) > 1 {
		if cmd, _ := lookup(args[1:]); cmd != nil {
			writeCommandHelp(w, cmd)
			return
		}
	}
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
