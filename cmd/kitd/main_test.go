package main

import (
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
