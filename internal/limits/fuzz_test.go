package limits

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseOverrides: a --limits file either is refused with an error that
// names the key at fault (or says the file is not an object of limits), or
// gives a table of every limit, each a valid rate under its own name; that
// table written out as a file reads back identically.
func FuzzParseOverrides(f *testing.F) {
	for _, s := range []string{
		`{"write": {"capacity": 5, "refill": 1, "windowSeconds": 10}}`,
		`{"read": {"capacity": 1000}, "post_message": {"windowSeconds": 0.5}}`,
		`{}`,
		`{"write": {"capacity": 5}, "wrtie": {"capacity": 5}}`,
		`{"write": {"burst": 5}}`,
		`{"files": {"capacity": -1}}`,
		`{"files": {"refill": 0}}`,
		`{"webhook": {"windowSeconds": -3}}`,
		`{"webhook": {"windowSeconds": 1e-10}}`,
		`{"read": {"capacity": 1.5}}`,
		`{"read": {"refill": "5"}}`,
		`{"read": {"windowSeconds": null}}`,
		`{"read": 5}`,
		`{"read": null}`,
		`{"read": {"capacity": 99999999999}}`,
		`{"read": {"capacity": 1000000, "windowSeconds": 31622400}}`,
		`{"read": {"capacity": 1, "capacity": 2}}`,
		`[1,2]`,
		`{} {}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := parseOverrides(data)
		if err != nil {
			if tab != nil {
				t.Fatalf("%q: a table with the error %v", data, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "want a JSON object") {
				if key, qerr := strconv.QuotedPrefix(msg); qerr != nil || !strings.HasPrefix(msg[len(key):], ": ") {
					t.Fatalf("%q: error %q names no key", data, msg)
				}
			}
			return
		}
		if len(tab) != len(Names()) {
			t.Fatalf("%q: %d rows, want %d", data, len(tab), len(Names()))
		}
		file := map[Name]map[string]any{}
		for _, n := range Names() {
			r := tab[n]
			if r.Name != n {
				t.Fatalf("%q: row %s holds the rate of %s", data, n, r.Name)
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("%q: accepted an invalid rate: %v", data, err)
			}
			file[n] = map[string]any{"capacity": r.Capacity, "refill": r.Refill, "windowSeconds": r.Window.Seconds()}
		}
		out, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseOverrides(out)
		if err != nil {
			t.Fatalf("%q: the table written out as %s is refused: %v", data, out, err)
		}
		for _, n := range Names() {
			if again[n] != tab[n] {
				t.Fatalf("%q: %v written out reads back as %v", data, tab[n], again[n])
			}
		}
	})
}
