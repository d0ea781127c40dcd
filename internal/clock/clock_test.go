package clock

import (
	"sync"
	"testing"
	"time"
)

func TestSystemIsRealUTC(t *testing.T) {
	before := time.Now()
	got := System().Now()
	after := time.Now()
	if got.Location() != time.UTC {
		t.Fatalf("System().Now() location = %v, want UTC", got.Location())
	}
	if got.Before(before.Add(-time.Millisecond)) || got.After(after.Add(time.Millisecond)) {
		t.Fatalf("System().Now() = %v, not between %v and %v", got, before, after)
	}
}

func TestTestClock(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, c *Test)
	}{
		{"starts at real now", func(t *testing.T, c *Test) {
			if d := time.Until(c.Now()); d < -time.Second || d > time.Second {
				t.Fatalf("fresh test clock is %v away from real time", d)
			}
		}},
		{"now is in UTC without a monotonic reading", func(t *testing.T, c *Test) {
			now := c.Now()
			if now.Location() != time.UTC {
				t.Fatalf("location = %v, want UTC", now.Location())
			}
			if now != now.Round(0) {
				t.Fatal("Now() carries a monotonic reading")
			}
		}},
		{"advance moves now forward by exactly d plus elapsed time", func(t *testing.T, c *Test) {
			before := c.Now()
			got := c.Advance(time.Hour)
			after := c.Now()
			if d := got.Sub(before); d < time.Hour || d > time.Hour+time.Second {
				t.Fatalf("Advance(1h) moved the clock by %v", d)
			}
			if after.Before(got) {
				t.Fatalf("Now() %v is before the time Advance returned %v", after, got)
			}
			if c.Offset() != time.Hour {
				t.Fatalf("Offset() = %v, want 1h", c.Offset())
			}
		}},
		{"advances add up", func(t *testing.T, c *Test) {
			start := c.Now()
			c.Advance(30 * time.Minute)
			c.Advance(90 * time.Second)
			if d := c.Now().Sub(start); d < 31*time.Minute+30*time.Second || d > 31*time.Minute+31*time.Second {
				t.Fatalf("two advances moved the clock by %v", d)
			}
		}},
		{"time still flows after an advance", func(t *testing.T, c *Test) {
			a := c.Advance(time.Minute)
			time.Sleep(20 * time.Millisecond)
			if d := c.Now().Sub(a); d < 20*time.Millisecond {
				t.Fatalf("only %v passed across a 20ms sleep", d)
			}
		}},
		{"negative and zero advances do nothing", func(t *testing.T, c *Test) {
			a := c.Now()
			b := c.Advance(-time.Hour)
			z := c.Advance(0)
			if b.Before(a) || z.Before(b) {
				t.Fatalf("clock went backwards: %v, %v, %v", a, b, z)
			}
			if c.Offset() != 0 {
				t.Fatalf("Offset() = %v, want 0", c.Offset())
			}
		}},
		{"concurrent advances and reads are safe and add up", func(t *testing.T, c *Test) {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					last := c.Now()
					for range 100 {
						c.Advance(time.Second)
						now := c.Now()
						if now.Before(last) {
							t.Errorf("clock went backwards: %v after %v", now, last)
						}
						last = now
					}
				})
			}
			wg.Wait()
			if c.Offset() != 800*time.Second {
				t.Fatalf("Offset() = %v, want 800s", c.Offset())
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, NewTest()) })
	}
}

func TestClockInterface(t *testing.T) {
	for _, c := range []Clock{System(), NewTest()} {
		if c.Now().IsZero() {
			t.Fatalf("%T.Now() is zero", c)
		}
	}
}

func TestUntilNextTick(t *testing.T) {
	const d = 100 * time.Millisecond
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	for _, tc := range []struct {
		name string
		now  time.Time
		want time.Duration
	}{
		{"just past a multiple waits nearly a period", at(1), 99 * time.Millisecond},
		{"midway waits half", at(50), 50 * time.Millisecond},
		{"just before a multiple waits for it", at(99), time.Millisecond},
		{"on a multiple waits a whole period, never zero", at(0), d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UntilNextTick(tc.now, d); got != tc.want {
				t.Fatalf("UntilNextTick = %v, want %v", got, tc.want)
			}
		})
	}
}
