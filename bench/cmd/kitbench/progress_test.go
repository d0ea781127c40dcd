package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/bench/loadgen"
)

func TestProgressLine(t *testing.T) {
	got := progressLine("post-1000-conversations on kitd", 3*time.Second, 11*time.Second, 35210.4, 100000, 2, 1)
	want := "kitbench: post-1000-conversations on kitd    3s/11s    35210 req/s     100000 ok      2 errors (+1)"
	if got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
}

func TestProgressOverwritesAndClears(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf}
	p.write("a long first line")
	p.write("short")
	if got := buf.String(); got != "\ra long first line\rshort            " {
		t.Fatalf("%q: the second line does not cover the first", got)
	}
	buf.Reset()
	p.stop = make(chan struct{})
	p.Stop()
	if got := buf.String(); got != "\r"+strings.Repeat(" ", 5)+"\r" {
		t.Fatalf("%q: Stop does not blank the line", got)
	}
	var live loadgen.Live
	q := startProgress(&buf, "x", &live, time.Second)
	q.Stop() // before its first tick: nothing written, no goroutine left
}
