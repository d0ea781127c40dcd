package limits

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// step is one Take at t0+at, with what it must answer (-1 = don't check).
type step struct {
	at         time.Duration
	ok         bool
	remaining  int
	retryAfter int
	reset      int
}

func take(n int, at time.Duration, ok bool) []step {
	s := make([]step, n)
	for i := range s {
		s[i] = step{at: at, ok: ok, remaining: -1, retryAfter: -1, reset: -1}
	}
	return s
}

func join(parts ...[]step) []step {
	var s []step
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func TestBucketRules(t *testing.T) {
	spec := Spec()
	tests := []struct {
		name  string
		rate  Rate
		steps []step
	}{
		{
			"write allows 50 then refuses the 51st within a minute",
			spec[Write],
			join(
				[]step{{0, true, 49, 0, 2}},
				take(48, 0, true),
				[]step{{0, true, 0, 0, 60}},
				[]step{{0, false, 0, 2, 60}},
				// a token comes back every 1.2 s, so still none after 1.1 s
				[]step{{1100 * time.Millisecond, false, 0, 1, 59}},
			),
		},
		{
			"read allows 100 then refuses the 101st",
			spec[Read],
			join(take(100, 0, true), take(1, 0, false)),
		},
		{
			"post_message allows a burst of 5 then 1 per second",
			spec[PostMessage],
			join(
				take(4, 0, true),
				[]step{{0, true, 0, 0, 5}},
				[]step{{0, false, 0, 1, 5}},
				[]step{{999 * time.Millisecond, false, 0, 1, -1}},
				[]step{{time.Second, true, 0, 0, 5}},
				[]step{{time.Second, false, 0, 1, 5}},
				[]step{{2 * time.Second, true, 0, 0, 5}},
				[]step{{3 * time.Second, true, 0, 0, 5}},
				[]step{{3 * time.Second, false, 0, 1, 5}},
			),
		},
		{
			"webhook is 1 per second sustained, burst 5",
			spec[Webhook],
			join(take(5, 0, true), take(1, 0, false), take(1, time.Second, true), take(1, time.Second, false)),
		},
		{
			"retry-after is whole seconds, never 0",
			// 1 token per 10 minutes, so the wait is long and rounds up;
			// then nearly all of it has passed and it still says 1.
			Rate{Name: "slow", Capacity: 1, Refill: 1, Window: 10*time.Minute + 500*time.Millisecond},
			[]step{
				{0, true, 0, 0, 601},
				{0, false, 0, 601, 601},
				{10 * time.Minute, false, 0, 1, 1},
				{10*time.Minute + 499*time.Millisecond, false, 0, 1, 1},
				{10*time.Minute + 500*time.Millisecond, true, 0, 0, 601},
			},
		},
		{
			"a bucket refills fully after its window",
			spec[Write],
			join(
				take(50, 0, true),
				take(1, 0, false),
				[]step{{30 * time.Second, true, 24, 0, 32}}, // half refilled: 25, take one; 26 missing = 31.2 s
				[]step{{91 * time.Second, true, 49, 0, 2}},  // full again, take one
			),
		},
		{
			"refill is continuous, not in steps",
			spec[Write], // one token every 1.2 s
			join(
				take(50, 0, true),
				take(1, 1199*time.Millisecond, false),
				take(1, 1200*time.Millisecond, true),
				take(1, 1200*time.Millisecond, false),
			),
		},
		{
			"clock going backwards grants nothing",
			spec[PostMessage],
			join(
				take(5, time.Hour, true),
				take(1, time.Hour, false),
				take(1, 0, false),             // an hour in the past
				take(1, -24*time.Hour, false), // a day in the past
				take(1, time.Hour, false),     // back to the latest instant seen
				take(1, time.Hour+time.Second, true),
				take(1, time.Hour+time.Second, false),
			),
		},
		{
			"never drifts over many refills of an uneven rate",
			// 7 per minute: one token every 8.571428… s, not whole
			// nanoseconds. Drained, so the cap never cuts a refill short:
			// after 1000 minutes token 7000 is due exactly on time.
			Rate{Name: "odd", Capacity: 7000, Refill: 7, Window: time.Minute},
			func() []step {
				s := join(take(7000, 0, true), take(1, 0, false))
				for i := 1; i <= 7000; i++ {
					at := time.Duration(i) * time.Minute / 7
					// exactly at the boundary (rounded down to the ns)
					// the token is not yet there; 1 ns later it is.
					if int64(i)*time.Minute.Nanoseconds()%7 != 0 {
						s = append(s, take(1, at, false)...)
						at++
					}
					s = append(s, take(1, at, true)...)
				}
				return s
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rate.Validate(); err != nil {
				t.Fatalf("rate %v: %v", tc.rate, err)
			}
			b := NewBucket(tc.rate, t0)
			for i, s := range tc.steps {
				d := b.Take(tc.rate, t0.Add(s.at))
				if d.OK != s.ok {
					t.Fatalf("step %d at +%v: OK = %v, want %v (%+v)", i, s.at, d.OK, s.ok, d)
				}
				check := func(what string, got, want int) {
					if want >= 0 && got != want {
						t.Fatalf("step %d at +%v: %s = %d, want %d (%+v)", i, s.at, what, got, want, d)
					}
				}
				check("Remaining", d.Remaining, s.remaining)
				check("RetryAfter", d.RetryAfter, s.retryAfter)
				check("ResetSeconds", d.ResetSeconds, s.reset)
				if !d.OK && d.RetryAfter < 1 {
					t.Fatalf("step %d: refused with RetryAfter %d", i, d.RetryAfter)
				}
				if d.OK && d.RetryAfter != 0 {
					t.Fatalf("step %d: allowed with RetryAfter %d", i, d.RetryAfter)
				}
				if d.Policy != tc.rate.Name || d.Rate != tc.rate {
					t.Fatalf("step %d: policy %q rate %v, want %q %v", i, d.Policy, d.Rate, tc.rate.Name, tc.rate)
				}
			}
		})
	}
}

func TestBucketZeroValueIsFull(t *testing.T) {
	r := Spec()[Write]
	var b Bucket
	if !b.Full(r, t0) {
		t.Fatal("zero Bucket is not full")
	}
	d := b.Take(r, t0)
	if !d.OK || d.Remaining != 49 {
		t.Fatalf("zero Bucket first Take = %+v", d)
	}
	if b.Full(r, t0) {
		t.Fatal("bucket is full after a take")
	}
	if !b.Full(r, t0.Add(1200*time.Millisecond)) {
		t.Fatal("bucket not full one refill later")
	}
}

func TestBucketRateShrinks(t *testing.T) {
	big := Rate{Name: "x", Capacity: 100, Refill: 1, Window: time.Hour}
	small := Rate{Name: "x", Capacity: 2, Refill: 1, Window: time.Second}
	b := NewBucket(big, t0)
	for range 100 {
		b.Take(big, t0)
	}
	// The debt is clamped to the new capacity: empty, refills in 2 s.
	if d := b.Take(small, t0); d.OK || d.RetryAfter != 1 || d.ResetSeconds != 2 {
		t.Fatalf("after shrinking: %+v", d)
	}
	if d := b.Take(small, t0.Add(time.Second)); !d.OK {
		t.Fatalf("one second later: %+v", d)
	}
}

func TestBucketInvalidRateAllows(t *testing.T) {
	var b Bucket
	for range 10 {
		if d := b.Take(Rate{}, t0); !d.OK {
			t.Fatalf("zero Rate refused: %+v", d)
		}
	}
}

func TestBucketIsTiny(t *testing.T) {
	if s := unsafe.Sizeof(Bucket{}); s != 16 {
		t.Fatalf("sizeof(Bucket) = %d, want 16", s)
	}
}

func TestTakeDoesNotAllocate(t *testing.T) {
	r := Spec()[PostMessage]
	b := NewBucket(r, t0)
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now = now.Add(100 * time.Millisecond)
		b.Take(r, now)
	})
	if allocs != 0 {
		t.Fatalf("Take allocates %v times", allocs)
	}
}

func TestHeaders(t *testing.T) {
	spec := Spec()
	tests := []struct {
		name           string
		rate           Rate
		takes          int
		policy, header string
	}{
		{"write after one request (docs/decisions.md example)", spec[Write], 1, `"write";q=50;w=60`, `"write";r=49;t=2`},
		{"read when fresh bucket is used once", spec[Read], 1, `"read";q=100;w=60`, `"read";r=99;t=1`},
		{"post_message policy window is the time to fill from empty", spec[PostMessage], 6, `"post_message";q=5;w=5`, `"post_message";r=0;t=5`},
		{"files refused", spec[Files], 21, `"files";q=20;w=60`, `"files";r=0;t=60`},
		{"name is an escaped sf-string", Rate{Name: `a"b\c`, Capacity: 1, Refill: 1, Window: 1500 * time.Millisecond}, 1, `"a\"b\\c";q=1;w=2`, `"a\"b\\c";r=0;t=2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(tc.rate, t0)
			var d Decision
			for range tc.takes {
				d = b.Take(tc.rate, t0)
			}
			if got := d.PolicyHeader(); got != tc.policy {
				t.Errorf("PolicyHeader() = %s, want %s", got, tc.policy)
			}
			if got := d.LimitHeader(); got != tc.header {
				t.Errorf("LimitHeader() = %s, want %s", got, tc.header)
			}
		})
	}
}

func TestHeadersAllocateOnce(t *testing.T) {
	r := Spec()[Write]
	b := NewBucket(r, t0)
	d := b.Take(r, t0)
	if n := testing.AllocsPerRun(100, func() { _ = d.LimitHeader() }); n > 1 {
		t.Fatalf("LimitHeader allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = d.PolicyHeader() }); n > 1 {
		t.Fatalf("PolicyHeader allocates %v times", n)
	}
}

func TestSpec(t *testing.T) {
	want := map[Name]Rate{
		Read:          {Read, 100, 100, time.Minute},
		Write:         {Write, 50, 50, time.Minute},
		PostMessage:   {PostMessage, 5, 1, time.Second},
		Files:         {Files, 20, 20, time.Minute},
		Webhook:       {Webhook, 5, 1, time.Second},
		Developer:     {Developer, 60, 60, time.Minute},
		ResponseURL:   {ResponseURL, 50, 50, time.Minute},
		Interactions:  {Interactions, 30, 30, time.Minute},
		SlashCommands: {SlashCommands, 10, 10, time.Minute},
		// kitd's own, per source address (docs/decisions.md "Rate limits").
		WebhookNotFound:  {WebhookNotFound, 30, 2, time.Second},
		KitAccessFailure: {KitAccessFailure, 20, 1, time.Second},
		SignInFailure:    {SignInFailure, 10, 10, time.Minute},
	}
	got := Spec()
	if len(got) != len(want) || len(Names()) != len(want) {
		t.Fatalf("Spec() has %d rows, Names() %d, want %d", len(got), len(Names()), len(want))
	}
	for _, n := range Names() {
		if got[n] != want[n] {
			t.Errorf("Spec()[%s] = %v, want %v", n, got[n], want[n])
		}
		if err := got[n].Validate(); err != nil {
			t.Errorf("Spec()[%s] invalid: %v", n, err)
		}
	}
	got[Write] = Rate{}
	if Spec()[Write] != want[Write] {
		t.Fatal("Spec() shares its map between calls")
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "limits.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		arg     string // or file body when file is set
		file    bool
		enabled bool
		check   func(t *testing.T, tab Table)
		errHas  []string
	}{
		{name: `Load("off") disables every limit`, arg: "off", check: func(t *testing.T, tab Table) {
			if tab != nil {
				t.Fatalf("table = %v, want nil", tab)
			}
		}},
		{name: `Load("spec") is Spec()`, arg: "spec", enabled: true, check: isSpecExcept()},
		{name: `Load("") is Spec()`, arg: "", enabled: true, check: isSpecExcept()},
		{name: "Load(file) overrides one row", file: true, enabled: true,
			arg:   `{"write": {"capacity": 5, "refill": 1, "windowSeconds": 10}}`,
			check: isSpecExcept(Rate{Write, 5, 1, 10 * time.Second})},
		{name: "Load(file) keeps spec fields a row leaves out", file: true, enabled: true,
			arg:   `{"read": {"capacity": 1000}, "post_message": {"windowSeconds": 0.5}}`,
			check: isSpecExcept(Rate{Read, 1000, 100, time.Minute}, Rate{PostMessage, 5, 1, 500 * time.Millisecond})},
		{name: "Load(file) with an empty object is Spec()", file: true, enabled: true, arg: `{}`, check: isSpecExcept()},
		{name: "Load(file) with unknown name is an error naming it", file: true,
			arg: `{"write": {"capacity": 5}, "wrtie": {"capacity": 5}}`, errHas: []string{`"wrtie"`, "unknown limit name"}},
		{name: "Load(file) with unknown field is an error naming it", file: true,
			arg: `{"write": {"burst": 5}}`, errHas: []string{`"write.burst"`, "unknown field"}},
		{name: "negative capacity rejected", file: true,
			arg: `{"files": {"capacity": -1}}`, errHas: []string{`"files"`, "capacity must be at least 1"}},
		{name: "zero refill rejected", file: true,
			arg: `{"files": {"refill": 0}}`, errHas: []string{`"files"`, "refill must be at least 1"}},
		{name: "negative window rejected", file: true,
			arg: `{"webhook": {"windowSeconds": -3}}`, errHas: []string{`"webhook.windowSeconds"`, "positive"}},
		{name: "zero window rejected", file: true,
			arg: `{"webhook": {"windowSeconds": 0}}`, errHas: []string{`"webhook.windowSeconds"`}},
		{name: "fractional capacity rejected", file: true,
			arg: `{"read": {"capacity": 1.5}}`, errHas: []string{`"read.capacity"`, "integer"}},
		{name: "quoted number rejected", file: true,
			arg: `{"read": {"refill": "5"}}`, errHas: []string{`"read.refill"`, "integer"}},
		{name: "null window rejected", file: true,
			arg: `{"read": {"windowSeconds": null}}`, errHas: []string{`"read.windowSeconds"`}},
		{name: "row that is not an object rejected", file: true,
			arg: `{"read": 5}`, errHas: []string{`"read"`}},
		{name: "huge capacity rejected", file: true,
			arg: `{"read": {"capacity": 99999999999}}`, errHas: []string{`"read.capacity"`}},
		{name: "file that is not a JSON object rejected", file: true,
			arg: `[1,2]`, errHas: []string{"JSON object"}},
		{name: "trailing data rejected", file: true,
			arg: `{} {}`, errHas: []string{"JSON object"}},
		{name: "missing file rejected", arg: "/nonexistent/limits.json", errHas: []string{"/nonexistent/limits.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			arg := tc.arg
			if tc.file {
				arg = writeFile(t, tc.arg)
			}
			tab, enabled, err := Load(arg)
			if tc.errHas != nil {
				if err == nil {
					t.Fatalf("Load(%s) = %v, want an error", tc.arg, tab)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("error %q does not contain %q", err, s)
					}
				}
				if tab != nil || enabled {
					t.Fatalf("error with table %v enabled %v", tab, enabled)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if enabled != tc.enabled {
				t.Fatalf("enabled = %v, want %v", enabled, tc.enabled)
			}
			tc.check(t, tab)
		})
	}
}

// isSpecExcept checks a table equals Spec() with the given rows replaced.
func isSpecExcept(rows ...Rate) func(t *testing.T, tab Table) {
	return func(t *testing.T, tab Table) {
		t.Helper()
		want := Spec()
		for _, r := range rows {
			want[r.Name] = r
		}
		if len(tab) != len(want) {
			t.Fatalf("table has %d rows, want %d", len(tab), len(want))
		}
		for n, r := range want {
			if tab[n] != r {
				t.Errorf("[%s] = %v, want %v", n, tab[n], r)
			}
		}
	}
}

func TestPolicyWindow(t *testing.T) {
	tests := []struct {
		name string
		rate Rate
		want int64
	}{
		{"per minute is 60", Rate{Capacity: 50, Refill: 50, Window: time.Minute}, 60},
		{"burst 5 at 1/s is 5", Rate{Capacity: 5, Refill: 1, Window: time.Second}, 5},
		{"rounds up", Rate{Capacity: 1, Refill: 3, Window: 10 * time.Second}, 4},
		{"at least 1", Rate{Capacity: 1, Refill: 1000, Window: time.Second}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rate.PolicyWindow(); got != tc.want {
				t.Fatalf("PolicyWindow() = %d, want %d", got, tc.want)
			}
		})
	}
}

func BenchmarkTake(b *testing.B) {
	r := Spec()[Write]
	bk := NewBucket(r, t0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		bk.Take(r, now)
	}
}

func BenchmarkHeaders(b *testing.B) {
	r := Spec()[Write]
	bk := NewBucket(r, t0)
	d := bk.Take(r, t0)
	b.ReportAllocs()
	for b.Loop() {
		_ = d.PolicyHeader()
		_ = d.LimitHeader()
	}
}

func TestPeek(t *testing.T) {
	r := Rate{Name: "p", Capacity: 2, Refill: 1, Window: time.Second}
	tests := []struct {
		name  string
		takes int // tokens taken at t0 before the peek
		at    time.Duration
		ok    bool
		retry int
	}{
		{"a full bucket has a token", 0, 0, true, 0},
		{"a bucket with one token left has one", 1, 0, true, 0},
		{"an empty bucket has none, and says when", 2, 0, false, 1},
		{"an empty bucket has one again after a refill", 2, time.Second, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(r, t0)
			for range tc.takes {
				b.Take(r, t0)
			}
			before := b
			d := b.Peek(r, t0.Add(tc.at))
			if d.OK != tc.ok || d.RetryAfter != tc.retry {
				t.Fatalf("Peek = OK %v RetryAfter %d, want %v %d", d.OK, d.RetryAfter, tc.ok, tc.retry)
			}
			if b != before {
				t.Fatal("Peek changed the bucket")
			}
		})
	}
}

func TestReturn(t *testing.T) {
	r := Rate{Name: "w", Capacity: 3, Refill: 3, Window: time.Minute} // a token every 20 s
	tests := []struct {
		name      string
		takes     int           // tokens taken at t0
		returnAt  time.Duration // the Return, after t0
		at        time.Duration // then Takes at t0+at until one is refused
		remaining int           // tokens granted at t0+at
	}{
		{"a returned token can be taken again", 3, 0, 0, 1},
		{"a return gives back one token, no more", 2, 0, 0, 2},
		{"a return to a full bucket leaves it full", 0, 0, 0, 3},
		{"a return after a refill adds to what the refill gave", 3, 20 * time.Second, 20 * time.Second, 2},
		{"a return to a bucket that filled meanwhile leaves it full", 1, time.Minute, time.Minute, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBucket(r, t0)
			for range tc.takes {
				if !b.Take(r, t0).OK {
					t.Fatal("set-up take refused")
				}
			}
			b.Return(r, t0.Add(tc.returnAt))
			n := 0
			for b.Take(r, t0.Add(tc.at)).OK {
				n++
			}
			if n != tc.remaining {
				t.Fatalf("%d tokens after the return, want %d", n, tc.remaining)
			}
		})
	}
}
