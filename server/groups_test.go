package server

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, w *wakes)
	}{
		{"stop returns only once the running wakes are done", func(t *testing.T, w *wakes) {
			w.open()
			started, release := make(chan struct{}), make(chan struct{})
			var done atomic.Bool
			w.start(func() { close(started); <-release; done.Store(true) })
			<-started
			stopped := make(chan struct{})
			go func() { w.stop(); close(stopped) }()
			select {
			case <-stopped:
				t.Fatal("stop returned while a wake ran")
			case <-time.After(20 * time.Millisecond):
			}
			close(release)
			<-stopped
			if !done.Load() {
				t.Fatal("stop returned before the wake ended")
			}
		}},
		{"no wake starts after stop", func(t *testing.T, w *wakes) {
			w.open()
			w.stop()
			var ran atomic.Bool
			w.start(func() { ran.Store(true) })
			w.stop()
			if ran.Load() {
				t.Fatal("a wake ran after stop")
			}
		}},
		{"a wake waits until the actors commit through the groups", func(t *testing.T, w *wakes) {
			ran := make(chan struct{})
			w.start(func() { close(ran) })
			select {
			case <-ran:
				t.Fatal("a wake ran before open")
			case <-time.After(20 * time.Millisecond):
			}
			w.open()
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatal("the wake did not run once open")
			}
			w.stop()
		}},
		{"stop drops the wakes not open yet", func(t *testing.T, w *wakes) {
			var ran atomic.Bool
			w.start(func() { ran.Store(true) })
			w.stop() // returns: nothing runs
			w.open()
			if ran.Load() {
				t.Fatal("a wake ran after stop")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newWakes()) })
	}
}
