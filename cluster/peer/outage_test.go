package peer

import (
	"strings"
	"testing"
	"time"

	"github.com/kitd/kitd/cluster/peer/peertest"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/internal/eventually"
	"github.com/kitd/kitd/proto/kitpb"
)

// An unreachable peer is an outage to warn of once, and again each
// outageReminder while it lasts, not a line a redial; a peer known to be
// going is not warned of; the end of a warned outage is told.
func TestOutagesAreWarnedOfOnce(t *testing.T) {
	const dialWarning = `level=WARN msg="peer: dial"`
	for _, tc := range []struct {
		name     string
		departed bool
		advance  time.Duration // the clock moved before the last dials
		warnings int
	}{
		{"an outage is one warning, whatever the redials", false, 0, 1},
		{"an outage that lasts is warned of again after outageReminder", false, outageReminder, 2},
		{"a peer that is going on purpose is not warned of", true, outageReminder, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewTest()
			b := start(t, "b", nil)
			addr := b.Addr()
			b.Close()
			a := start(t, "a", func(c *Config) {
				c.Clock = clk
				c.Departed = func(string) bool { return tc.departed }
			})
			failDials(t, a, addr, 3)
			clk.Advance(tc.advance)
			failDials(t, a, addr, 5)
			if got := strings.Count(a.log.String(), dialWarning); got != tc.warnings {
				t.Fatalf("%d warnings of failed dials, want %d; log:\n%s", got, tc.warnings, a.log)
			}
		})
	}
}

func TestTheEndOfAWarnedOutageIsTold(t *testing.T) {
	b := start(t, "b", nil)
	addr := b.Addr()
	b.Close()
	a := start(t, "a", nil)
	failDials(t, a, addr, 2)
	start(t, "b", func(c *Config) { c.ListenAddr = addr })
	eventually.True(t, "a call to b once it is back", func() bool {
		_, err := a.Call(ctxFor(t), addr, &kitpb.GetUser{UserId: "u"}, "r")
		return err == nil
	})
	if log := a.log.String(); !strings.Contains(log, `level=INFO msg="peer: reachable again"`) || !strings.Contains(log, "failedDials=2") {
		t.Fatalf("no line for the outage's end; log:\n%s", log)
	}
}

// A connection a departing peer resets is expected; one reset by a peer
// not known to be going is warned of (and counted as refused).
func TestResetByADepartingPeerIsNotWarnedOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		departed bool
		warned   bool
	}{
		{"a peer not known to be going is warned of", false, true},
		{"a peer that is going is not", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := start(t, "b", nil)
			p := peertest.NewProxy(t, b.Addr())
			a := start(t, "a", func(c *Config) {
				c.Departed = func(peer string) bool { return tc.departed && peer == "b" }
			})
			mustCall(t, a, p.Addr(), "a", "u")
			p.Reset()
			eventually.True(t, "the connection seen broken", func() bool {
				d, _ := a.dialer(p.Addr())
				c := d.current()
				return c == nil || c.broken()
			})
			warned := strings.Contains(a.log.String(), `msg="peer: connection closed"`)
			if warned != tc.warned || (a.Stats().Refused > 0) != tc.warned {
				t.Fatalf("warned %v, refused %d; want warned %v; log:\n%s", warned, a.Stats().Refused, tc.warned, a.log)
			}
		})
	}
}

// failDials calls addr from a until a's dials to it have failed n times
// in all.
func failDials(t *testing.T, a *node, addr string, n int) {
	t.Helper()
	eventually.True(t, "failed dials", func() bool {
		a.Call(ctxFor(t), addr, &kitpb.GetUser{}, "r")
		d, _ := a.dialer(addr)
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.failures >= n
	})
}
