package manifest

import (
	"cmp"
	"errors"
	"strconv"
	"strings"
)

// Version is a Kit version: MAJOR.MINOR.PATCH (docs/api.md "Versioning").
type Version struct{ Major, Minor, Patch int }

// Digit limits of the three parts (docs/api.md "Versioning"). They keep every
// version comparable as plain ints and short enough for URL paths.
var versionDigits = [3]int{4, 5, 6}

var versionPart = [3]string{"major", "minor", "patch"}

// ParseVersion parses MAJOR.MINOR.PATCH: ASCII digits only, no leading zeros,
// at most 4, 5 and 6 digits, no pre-release or build suffix. Error texts never
// contain s, so callers may show them as validation messages.
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, errors.New("must be MAJOR.MINOR.PATCH, for example 1.0.0")
	}
	var n [3]int
	for i, p := range parts {
		if p == "" {
			return Version{}, errors.New("must be MAJOR.MINOR.PATCH, for example 1.0.0")
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return Version{}, errors.New("must be MAJOR.MINOR.PATCH with digits only, for example 1.0.0")
			}
		}
		if len(p) > 1 && p[0] == '0' {
			return Version{}, errors.New(versionPart[i] + " must not have leading zeros")
		}
		if len(p) > versionDigits[i] {
			return Version{}, errors.New(versionPart[i] + " must have at most " + strconv.Itoa(versionDigits[i]) + " digits")
		}
		n[i], _ = strconv.Atoi(p) // cannot fail: at most 6 ASCII digits
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// String returns the version in MAJOR.MINOR.PATCH form.
func (v Version) String() string {
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
}

// Compare returns -1, 0 or +1 as v is lower than, equal to or higher than o.
func (v Version) Compare(o Version) int {
	if c := cmp.Compare(v.Major, o.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Minor, o.Minor); c != 0 {
		return c
	}
	return cmp.Compare(v.Patch, o.Patch)
}
