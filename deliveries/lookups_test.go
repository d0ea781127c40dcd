package deliveries

import (
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/cluster"
	"github.com/kitd/kitd/internal/clock"
	"github.com/kitd/kitd/proto/kitpb"
)

// fakeKit answers GetSigningSecrets with secrets, counting the questions;
// during, when set, runs as it answers.
type fakeKit struct {
	secrets []string
	asked   *atomic.Int32
	during  func()
}

func (k fakeKit) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetSigningSecrets); ok {
		k.asked.Add(1)
		if k.during != nil {
			k.during()
		}
		ctx.Respond(&kitpb.SigningSecretsReply{Secrets: k.secrets})
	}
}

// fakeInstallation answers GetInstallation, counting the questions.
type fakeInstallation struct{ asked *atomic.Int32 }

func (i fakeInstallation) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*kitpb.GetInstallation); ok {
		i.asked.Add(1)
		ctx.Respond(&kitpb.InstallationReply{Installation: &kitpb.Installation{KitId: "k1", KitVersion: "1.0.0"}})
	}
}

// The sender asks the installation and the Kit once for what its
// deliveries need, and again only when an invalidation, or lookupTTL on
// the service clock, says what it kept may be out of date.
func TestLookupsAreKeptUntilInvalidated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		// between runs between the two lookups; during, as the Kit answers
		// the first.
		between, during func(s *Sender, clk *clock.Test)
		// kitAsked and instAsked are how many times the Kit and the
		// installation answered after two lookups.
		kitAsked, instAsked int32
	}{
		{name: "a second lookup asks no actor", secrets: []string{"kss_a"}, kitAsked: 1, instAsked: 1},
		{name: "a changed installation is asked again", secrets: []string{"kss_a"}, kitAsked: 1, instAsked: 2,
			between: func(s *Sender, _ *clock.Test) { s.InstallationChanged("i1") }},
		{name: "a Kit whose signing secrets changed is asked again", secrets: []string{"kss_a"}, kitAsked: 2, instAsked: 1,
			between: func(s *Sender, _ *clock.Test) { s.SigningSecretsChanged("k1") }},
		{name: "a lookup past lookupTTL asks again", secrets: []string{"kss_a"}, kitAsked: 2, instAsked: 2,
			between: func(_ *Sender, clk *clock.Test) { clk.Advance(lookupTTL) }},
		{name: "a lookup just within lookupTTL asks no actor", secrets: []string{"kss_a"}, kitAsked: 1, instAsked: 1,
			between: func(_ *Sender, clk *clock.Test) { clk.Advance(lookupTTL - lookupTTL/10) }},
		{name: "a Kit without a signing secret is asked each time", kitAsked: 2, instAsked: 1},
		{name: "what was read across an invalidation is not kept", secrets: []string{"kss_a"}, kitAsked: 2, instAsked: 1,
			during: func(s *Sender, _ *clock.Test) { s.SigningSecretsChanged("k1") }},
		{name: "another Kit's rotation keeps this one's", secrets: []string{"kss_a"}, kitAsked: 1, instAsked: 1,
			between: func(s *Sender, _ *clock.Test) { s.InstallationChanged("i2"); s.SigningSecretsChanged("k2") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kitAsked, instAsked atomic.Int32
			var s *Sender
			clk := clock.NewTest()
			kit := fakeKit{secrets: tc.secrets, asked: &kitAsked}
			if tc.during != nil {
				kit.during = func() {
					if kitAsked.Load() == 1 {
						tc.during(s, clk)
					}
				}
			}
			node, err := cluster.Start(cluster.Config{},
				&cluster.Kind{Name: actors.KindKit, New: func(string) actor.Actor { return kit }},
				&cluster.Kind{Name: actors.KindInstallation, New: func(string) actor.Actor { return fakeInstallation{asked: &instAsked} }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(node.Stop)
			s = New(Config{Node: node, Clock: clk})
			t.Cleanup(s.Close)

			for i := range 2 {
				in, err := s.installed("i1")
				if err != nil || in.kitID != "k1" || in.version != "1.0.0" {
					t.Fatalf("lookup %d: installation %+v, %v", i+1, in, err)
				}
				secrets, err := s.signingSecrets("k1")
				if len(tc.secrets) == 0 && !errors.Is(err, errNoSecret) {
					t.Fatalf("lookup %d: signing secrets %v, %v; want errNoSecret", i+1, secrets, err)
				}
				if len(tc.secrets) > 0 && (err != nil || !slices.Equal(secrets, tc.secrets)) {
					t.Fatalf("lookup %d: signing secrets %v, %v; want %v", i+1, secrets, err, tc.secrets)
				}
				if i == 0 && tc.between != nil {
					tc.between(s, clk)
				}
			}
			if kitAsked.Load() != tc.kitAsked || instAsked.Load() != tc.instAsked {
				t.Errorf("the Kit was asked %d times, the installation %d; want %d and %d", kitAsked.Load(), instAsked.Load(), tc.kitAsked, tc.instAsked)
			}
		})
	}
}

// Kept lookups past lookupTTL are swept once there are enough of them: a
// node that delivered for many installations once does not keep them all.
func TestExpiredLookupsAreSwept(t *testing.T) {
	var l lookups[int]
	clk := clock.NewTest()
	for i := range minSweep {
		id := strconv.Itoa(i)
		_, gen, _ := l.get(id, clk.Now())
		l.put(id, i, gen, clk.Now())
	}
	clk.Advance(lookupTTL)
	_, gen, _ := l.get("new", clk.Now())
	l.put("new", 1, gen, clk.Now())
	if len(l.entries) != 1 {
		t.Fatalf("%d entries kept after the sweep, want the new one only", len(l.entries))
	}
}
