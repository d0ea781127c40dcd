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
			release := make(chan struct{})
			var done atomic.Bool
			w.start(func() { <-release; done.Store(true) })
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
			w.stop()
			var ran atomic.Bool
			w.start(func() { ran.Store(true) })
			w.stop()
			if ran.Load() {
				t.Fatal("a wake ran after stop")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, new(wakes)) })
	}
}
