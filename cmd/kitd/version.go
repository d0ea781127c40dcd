package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=1.4.0".
// Unset, the main module's version stands in (a pseudo-version from the
// VCS stamp, or "(devel)"), else "dev".
var version string

// build is what `kitd version` prints and kitd_build_info carries.
type build struct {
	version, commit, goVersion string
	modified                   bool // the work tree had changes the commit does not hold
}

// buildOf reads the build's facts: the -X version, then the VCS stamp the
// go command writes (vcs.revision, vcs.modified) when it builds in a
// repository; "unknown" when it could not (-buildvcs=false, no git).
func buildOf(info *debug.BuildInfo, ok bool) build {
	b := build{version: version, commit: "unknown", goVersion: runtime.Version()}
	if ok {
		if b.version == "" {
			b.version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.commit = s.Value
			case "vcs.modified":
				b.modified = s.Value == "true"
			}
		}
	}
	if b.version == "" {
		b.version = "dev"
	}
	return b
}

// commitLabel is the commit, marked when the tree held more than it.
func (b build) commitLabel() string {
	if b.modified {
		return b.commit + "+modified"
	}
	return b.commit
}

// String is the version and the commit on one line, as a backup's header
// records the kitd that made it.
func (b build) String() string {
	return b.version + " " + b.commitLabel()
}

// printVersion is `kitd version`.
func printVersion(w io.Writer) {
	b := buildOf(debug.ReadBuildInfo())
	fmt.Fprintf(w, "kitd %s\ncommit %s\n%s\n", b.version, b.commitLabel(), b.goVersion)
}
