package manifest

import "testing"

func TestParseVersion(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Version
		ok   bool
	}{
		{"plain version is accepted", "1.2.3", Version{1, 2, 3}, true},
		{"all zeros are accepted", "0.0.0", Version{0, 0, 0}, true},
		{"largest version is accepted", "9999.99999.999999", Version{9999, 99999, 999999}, true},
		{"99999 minor is accepted", "1.99999.0", Version{1, 99999, 0}, true},
		{"leading zero in major is rejected", "01.2.3", Version{}, false},
		{"leading zero in minor is rejected", "1.02.3", Version{}, false},
		{"leading zero in patch is rejected", "1.2.03", Version{}, false},
		{"double zero is rejected", "00.1.1", Version{}, false},
		{"5-digit major is rejected", "10000.0.0", Version{}, false},
		{"6-digit minor is rejected", "1.100000.0", Version{}, false},
		{"7-digit patch is rejected", "1.0.1000000", Version{}, false},
		{"two parts are rejected", "1.2", Version{}, false},
		{"four parts are rejected", "1.2.3.4", Version{}, false},
		{"empty part is rejected", "1..3", Version{}, false},
		{"empty string is rejected", "", Version{}, false},
		{"pre-release suffix is rejected", "1.2.3-beta", Version{}, false},
		{"build suffix is rejected", "1.2.3+5", Version{}, false},
		{"leading v is rejected", "v1.2.3", Version{}, false},
		{"sign is rejected", "+1.2.3", Version{}, false},
		{"spaces are rejected", " 1.2.3", Version{}, false},
		{"non-ASCII digits are rejected", "١.2.3", Version{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseVersion(%q) error = %v, want ok %v", tt.in, err, tt.ok)
			}
			if got != tt.want {
				t.Fatalf("ParseVersion(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if err != nil && tt.in != "" && containsFold(err.Error(), tt.in) {
				t.Fatalf("error %q echoes the input", err)
			}
			if tt.ok && got.String() != tt.in {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestVersionCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0},
		{"1.0.0", "2.0.0", -1},
		{"2.0.0", "1.99999.999999", 1},
		{"1.2.0", "1.10.0", -1}, // numeric, not lexical
		{"1.2.10", "1.2.9", 1},
		{"0.0.1", "0.0.0", 1},
	}
	for _, tt := range tests {
		a, _ := ParseVersion(tt.a)
		b, _ := ParseVersion(tt.b)
		if got := a.Compare(b); got != tt.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := b.Compare(a); got != -tt.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
