package blocks

import (
	"strings"
	"testing"
)

func TestCurrencyTable(t *testing.T) {
	if len(activeCurrencies)%4 != 0 {
		t.Fatal("entries must be four bytes")
	}
	prev := ""
	for i := 0; i < len(activeCurrencies); i += 4 {
		c := activeCurrencies[i : i+3]
		if activeCurrencies[i+3] != ' ' || strings.ToUpper(c) != c || c <= prev {
			t.Fatalf("entry %q at %d is malformed or out of order", c, i)
		}
		if !isCurrency([]byte(c)) {
			t.Fatalf("%s not found", c)
		}
		prev = c
	}
	for _, c := range []string{"ANG", "BGN", "HRK", "SLL", "ZWL", "CUC", "AAA", "ZZZ", "EU", ""} {
		if isCurrency([]byte(c)) {
			t.Errorf("%q is accepted", c)
		}
	}
}

// TestTables keeps the schema tables consistent with the code that reads
// them: object sizes fit vals, and post rules read the fields they mean.
func TestTables(t *testing.T) {
	seen := map[*spec]bool{}
	var walk func(where string, fields []field)
	walk = func(where string, fields []field) {
		if len(fields) > maxFields {
			t.Errorf("%s has %d fields, more than maxFields", where, len(fields))
		}
		for _, f := range fields {
			for s := f.spec; s != nil && !seen[s]; s = s.elem {
				seen[s] = true
				walk(where+"."+f.name, s.fields)
			}
		}
	}
	kinds := append(append(blockKinds[:], accessoryKinds[:]...), elementKinds[:]...)
	for _, k := range kinds {
		walk(k.name, k.fields)
	}
	fieldAt := func(fields []field, i int) string { return fields[i].name }
	for _, c := range []struct{ got, want string }{
		{fieldAt(blockKinds[4].fields, tableRows), "rows"},
		{fieldAt(metricFields, metricFormat), "format"},
		{fieldAt(metricFields, metricCurrency), "currency"},
		{fieldAt(buttonKind.fields, buttonStyle), "style"},
		{fieldAt(buttonKind.fields, buttonConfirm), "confirm"},
		{fieldAt(textObject.fields, textObjType), "type"},
		{fieldAt(textObject.fields, textObjText), "text"},
		{blockKinds[4].name, "table"},
	} {
		if c.got != c.want {
			t.Errorf("post rule reads %q, want %q", c.got, c.want)
		}
	}
}
