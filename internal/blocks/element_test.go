package blocks

import (
	"slices"
	"testing"
)

func TestFindElement(t *testing.T) {
	raw := `[
		{"type":"section","text":{"type":"plain","text":"Deploy?"},"accessory":{"type":"overflow","actionId":"more","options":[{"text":"a","value":"va"},{"text":"b","value":"vb"}]}},
		{"type":"actions","elements":[
			{"type":"button","actionId":"go","text":"Go","value":"v1"},
			{"type":"static_select","actionId":"env","options":[{"text":"Prod","value":"prod"},{"text":"Dev","value":"dev"}]}
		]}
	]`
	stored, err := Validate([]byte(raw), Policy{Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		blocks   []byte
		actionID string
		want     Element
		found    bool
	}{
		{"a button of an actions block is found with its value", stored, "go", Element{Type: "button", Value: "v1"}, true},
		{"a select of an actions block is found with its options", stored, "env", Element{Type: "static_select", Options: []string{"prod", "dev"}}, true},
		{"a section's accessory is found", stored, "more", Element{Type: "overflow", Options: []string{"va", "vb"}}, true},
		{"an actionId no element has is not found", stored, "nope", Element{}, false},
		{"an empty actionId is not found", stored, "", Element{}, false},
		{"a message without blocks has no element", nil, "go", Element{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, found := FindElement(c.blocks, c.actionID)
			if found != c.found || got.Type != c.want.Type || got.Value != c.want.Value || !slices.Equal(got.Options, c.want.Options) {
				t.Fatalf("FindElement = %+v, %v; want %+v, %v", got, found, c.want, c.found)
			}
		})
	}
}
