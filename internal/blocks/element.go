package blocks

import "encoding/json"

// Element is one interactive element of a stored message: what a member's
// interaction with it sends to the Kit.
type Element struct {
	Type    string   // button, static_select or overflow
	Value   string   // a button's value ("" when it has none)
	Options []string // the option values of a select or overflow menu
}

// storedElement is the part of an element or accessory FindElement reads.
type storedElement struct {
	Type     string `json:"type"`
	ActionID string `json:"actionId"`
	Value    string `json:"value"`
	Options  []struct {
		Value string `json:"value"`
	} `json:"options"`
}

// FindElement finds the interactive element whose actionId is actionID in
// stored blocks (an output of Validate: actionIds are unique in a message),
// in an actions block or as a section's accessory. A member's click is
// rare next to posts, so it decodes plainly rather than in one pass.
func FindElement(stored []byte, actionID string) (Element, bool) {
	var bs []struct {
		Type      string          `json:"type"`
		Elements  []storedElement `json:"elements"`
		Accessory *storedElement  `json:"accessory"`
	}
	if len(stored) == 0 || json.Unmarshal(stored, &bs) != nil {
		return Element{}, false
	}
	for _, b := range bs {
		var candidates []storedElement
		switch {
		case b.Type == "actions":
			candidates = b.Elements
		case b.Type == "section" && b.Accessory != nil:
			candidates = []storedElement{*b.Accessory}
		}
		for _, e := range candidates {
			if e.ActionID == "" || e.ActionID != actionID {
				continue
			}
			el := Element{Type: e.Type, Value: e.Value}
			for _, o := range e.Options {
				el.Options = append(el.Options, o.Value)
			}
			return el, true
		}
	}
	return Element{}, false
}
