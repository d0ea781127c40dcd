package blocks

import (
	"math"
	"strconv"
	"strings"

	"github.com/kitd/kitd/internal/jsontext"
)

// Limits of single elements: docs/api.md "Blocks", and docs/blocks.md where
// the contract is silent.
const (
	maxOptions = 100 // options of a static_select
	maxColumns = 6   // columns of a table
	maxRows    = 20  // rows of a table
	maxFields  = 8   // keys of the largest object kind (a button has 7)
)

// rule names the check that a spec applies. Checks are dispatched by a
// switch rather than stored as closures so that the validator does not
// escape to the heap: it stays on Validate's stack, which saves an
// allocation and the GC write barriers on every path push.
type rule uint8

const (
	rText        rule = iota + 1 // plain text of min..max characters
	rTextObject                  // {type: plain|mrkdwn, text}
	rEnum                        // one of names
	rArray                       // min..max elements, each checked by elem
	rObject                      // keys in fields, then post
	rBlockID                     // blockId: pattern, unique in the message
	rActionID                    // actionId: pattern, unique in the message
	rKey                         // metric or column key: pattern, unique in the block
	rNumber                      // finite JSON number
	rBool                        // true or false
	rCurrency                    // active ISO 4217 code
	rURL                         // https URL
	rFile                        // UUID of a file visible in the conversation
	rAccessory                   // section accessory: image or interactive element
	rElement                     // actions element: interactive element
	rOptions                     // option list of a select or overflow menu (max)
	rOptionValue                 // option value: text, unique in the element
)

// post names a rule that spans the keys of one object.
type post uint8

const (
	postNone    post = iota
	postMetric       // currency exactly when format is currency
	postTable        // rows against the declared columns
	postButton       // a danger button needs confirm
	postTextObj      // text checked as mrkdwn when type is mrkdwn
)

// spec says how to check one value.
type spec struct {
	rule     rule
	min, max int
	names    []string // rEnum
	reason   string   // rEnum: the reason for other values; rKey: for a duplicate
	elem     *spec    // rArray
	fields   []field  // rObject
	post     post     // rObject
	reset    bool     // rArray: start a new key set (metric items, table columns)
}

// field is one allowed key of an object.
type field struct {
	name     string
	required bool
	spec     *spec // nil: checked elsewhere (the "type" key, or a post rule)
}

// vals holds, per field index, the value token of the key, or 0 when absent
// (token 0 is the blocks array itself, never a member).
type vals [maxFields]int32

// kindSpec describes one `type` of block or element.
type kindSpec struct {
	name   string
	fields []field
	post   post
	// interactive: an actions block, or a button, select or overflow menu.
	interactive bool
}

func text(min, max int) *spec { return &spec{rule: rText, min: min, max: max} }
func arrayOf(min, max int, elem *spec) *spec {
	return &spec{rule: rArray, min: min, max: max, elem: elem}
}
func objectOf(p post, fields ...field) *spec { return &spec{rule: rObject, fields: fields, post: p} }
func enum(names ...string) *spec {
	return &spec{rule: rEnum, names: names, reason: "must be one of: " + strings.Join(names, ", ")}
}
func simple(r rule) *spec { return &spec{rule: r} }

var (
	typeField    = field{name: "type", required: true}
	blockIDField = field{name: "blockId", spec: simple(rBlockID)}
	textObject   = objectOf(postTextObj,
		field{name: "type", required: true, spec: enum("plain", "mrkdwn")},
		field{name: "text", required: true}, // postTextObj, once the type is known
	)
	httpsURL = simple(rURL)
	fileRef  = simple(rFile)
)

// Block kinds (docs/blocks.md "Block types").
var blockKinds = [...]kindSpec{
	{name: "header", fields: []field{typeField, blockIDField,
		{name: "text", required: true, spec: text(1, 150)},
	}},
	{name: "section", fields: []field{typeField, blockIDField,
		{name: "text", required: true, spec: textObject},
		{name: "accessory", spec: simple(rAccessory)},
	}},
	{name: "fields", fields: []field{typeField, blockIDField,
		{name: "fields", required: true, spec: arrayOf(1, 10, objectOf(postNone,
			field{name: "label", required: true, spec: text(1, 60)},
			field{name: "value", required: true, spec: text(1, 200)},
		))},
	}},
	{name: "metrics", fields: []field{typeField, blockIDField,
		{name: "items", required: true, spec: keyed(arrayOf(1, 4, objectOf(postMetric, metricFields...)))},
	}},
	{name: "table", post: postTable, fields: []field{typeField, blockIDField,
		{name: "columns", required: true, spec: keyed(arrayOf(1, maxColumns, objectOf(postNone,
			field{name: "key", required: true, spec: &spec{rule: rKey, reason: "must be unique within the table"}},
			field{name: "label", required: true, spec: text(1, 60)},
			field{name: "align", required: true, spec: enum("left", "center", "right")},
		)))},
		{name: "rows", required: true}, // needs the columns: postTable
	}},
	{name: "list", fields: []field{typeField, blockIDField,
		{name: "items", required: true, spec: arrayOf(1, 20, objectOf(postNone,
			field{name: "title", required: true, spec: text(1, 150)},
			field{name: "subtitle", spec: text(1, 300)},
			field{name: "url", spec: httpsURL},
		))},
	}},
	{name: "context", fields: []field{typeField, blockIDField,
		{name: "elements", required: true, spec: arrayOf(1, 10, textObject)},
	}},
	{name: "divider", fields: []field{typeField, blockIDField}},
	{name: "image", fields: []field{typeField, blockIDField,
		{name: "fileId", required: true, spec: fileRef},
		{name: "alt", required: true, spec: text(1, 200)},
	}},
	{name: "actions", interactive: true, fields: []field{typeField, blockIDField,
		{name: "elements", required: true, spec: arrayOf(1, 5, simple(rElement))},
	}},
}

// keyed marks an array whose elements carry keys unique within the block.
func keyed(s *spec) *spec { s.reset = true; return s }

// Indices of the fields that post rules read.
const (
	tableRows      = 3
	metricFormat   = 3
	metricCurrency = 4
	buttonStyle    = 4
	buttonConfirm  = 6
	textObjType    = 0
	textObjText    = 1
)

var metricFields = []field{
	{name: "key", required: true, spec: &spec{rule: rKey, reason: "must be unique within the block"}},
	{name: "label", required: true, spec: text(1, 60)},
	{name: "value", required: true, spec: simple(rNumber)},
	{name: "format", spec: enum("integer", "decimal", "currency", "percent")},
	{name: "currency", spec: simple(rCurrency)},
	{name: "primary", required: true, spec: simple(rBool)},
}

// Interactive elements, and the image accessory.
var (
	confirmObject = objectOf(postNone,
		field{name: "title", required: true, spec: text(1, 100)},
		field{name: "text", required: true, spec: text(1, 300)},
		field{name: "confirm", required: true, spec: text(1, 30)},
		field{name: "deny", required: true, spec: text(1, 30)},
	)
	option = objectOf(postNone,
		field{name: "text", required: true, spec: text(1, 75)},
		field{name: "value", required: true, spec: &spec{rule: rOptionValue, min: 1, max: 150}},
	)
	buttonKind = kindSpec{name: "button", interactive: true, post: postButton, fields: []field{typeField,
		{name: "actionId", required: true, spec: simple(rActionID)},
		{name: "text", required: true, spec: text(1, 75)},
		{name: "value", spec: text(0, 2000)},
		{name: "style", spec: enum("default", "primary", "danger")},
		{name: "url", spec: httpsURL},
		{name: "confirm", spec: confirmObject},
	}}
	selectKind = kindSpec{name: "static_select", interactive: true, fields: []field{typeField,
		{name: "actionId", required: true, spec: simple(rActionID)},
		{name: "placeholder", spec: text(1, 150)},
		{name: "options", required: true, spec: &spec{rule: rOptions, max: maxOptions}},
		{name: "confirm", spec: confirmObject},
	}}
	overflowKind = kindSpec{name: "overflow", interactive: true, fields: []field{typeField,
		{name: "actionId", required: true, spec: simple(rActionID)},
		{name: "options", required: true, spec: &spec{rule: rOptions, max: 5}},
		{name: "confirm", spec: confirmObject},
	}}
	imageAccessoryKind = kindSpec{name: "image", fields: []field{typeField,
		{name: "fileId", required: true, spec: fileRef},
		{name: "alt", required: true, spec: text(1, 200)},
	}}

	elementKinds   = [...]kindSpec{buttonKind, selectKind, overflowKind}
	accessoryKinds = [...]kindSpec{imageAccessoryKind, buttonKind, selectKind, overflowKind}
)

// oneOf is the reason for a "type" outside kinds.
func oneOf(kinds []kindSpec) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return "must be one of: " + strings.Join(names, ", ")
}

var (
	blockTypeReason     = oneOf(blockKinds[:])
	elementTypeReason   = oneOf(elementKinds[:])
	accessoryTypeReason = oneOf(accessoryKinds[:])
)

// block validates one element of the blocks array.
func (v *validator) block(t int32) bool {
	k := v.kindOf(t, blockKinds[:], blockTypeReason)
	if k == nil {
		return false
	}
	if k.interactive {
		// Counted before stripping, so a message is valid or not
		// whatever the policy.
		v.actions++
		if v.actions > MaxActions {
			return v.fail("exceeds the limit of " + strconv.Itoa(MaxActions) + " actions blocks per message")
		}
		if !v.p.Interactive {
			v.drop = true
		}
	}
	return v.object(t, k.fields, k.post)
}

// element validates an actions element or an accessory.
func (v *validator) element(t int32, kinds []kindSpec, reason string) *kindSpec {
	k := v.kindOf(t, kinds, reason)
	if k == nil {
		return nil
	}
	if k.interactive {
		v.interactive++
		if v.interactive > MaxInteractive {
			v.fail("exceeds the limit of " + strconv.Itoa(MaxInteractive) + " interactive elements per message")
			return nil
		}
	}
	if !v.object(t, k.fields, k.post) {
		return nil
	}
	return k
}

// kindOf resolves the "type" of object t among kinds.
func (v *validator) kindOf(t int32, kinds []kindSpec, reason string) *kindSpec {
	if v.toks[t].Kind != jsontext.Object {
		v.fail("must be an object")
		return nil
	}
	tt := v.member(t, "type")
	switch {
	case tt == 0:
		v.failAt("type", "is required")
		return nil
	case v.toks[tt].Kind != jsontext.String:
		v.failAt("type", "must be a string")
		return nil
	}
	name := v.str(tt)
	for i := range kinds {
		if string(name) == kinds[i].name {
			return &kinds[i]
		}
	}
	v.failAt("type", reason)
	return nil
}

// object checks that t is an object whose keys are all in fields, each at
// most once, not null, valid, and that the required ones are present; then
// the post rule. Keys are checked in document order, so the first problem
// reported is the first in the input.
func (v *validator) object(t int32, fields []field, p post) bool {
	tk := &v.toks[t]
	if tk.Kind != jsontext.Object {
		return v.fail("must be an object")
	}
	var got vals
	hint := 0 // clients tend to send keys in the table's order: try the next field first
	for j := t + 1; j < tk.Next; j = v.toks[j+1].Next {
		name := v.str(j)
		fi := -1
		for x := range fields {
			y := hint + x
			if y >= len(fields) {
				y -= len(fields)
			}
			if string(name) == fields[y].name {
				fi = y
				break
			}
		}
		if fi < 0 {
			return v.fail("has a key that is not allowed")
		}
		f := &fields[fi]
		val := j + 1
		switch {
		case got[fi] != 0:
			return v.failAt(f.name, "is a duplicate key")
		case v.toks[val].Kind == jsontext.Null:
			return v.failAt(f.name, "must not be null; omit the key instead")
		}
		got[fi] = val
		hint = fi + 1
		if f.spec != nil && !v.check(val, f.spec) {
			return v.up(f.name)
		}
	}
	for x := range fields {
		if fields[x].required && got[x] == 0 {
			return v.failAt(fields[x].name, "is required")
		}
	}
	switch p {
	case postMetric:
		isCurrency := got[metricFormat] != 0 && string(v.str(got[metricFormat])) == "currency"
		switch {
		case isCurrency && got[metricCurrency] == 0:
			return v.failAt("currency", "is required when format is currency")
		case !isCurrency && got[metricCurrency] != 0:
			return v.failAt("currency", "is allowed only when format is currency")
		}
	case postTable:
		if !v.rows(got[tableRows]) {
			return v.up("rows")
		}
	case postButton:
		if got[buttonStyle] != 0 && string(v.str(got[buttonStyle])) == "danger" && got[buttonConfirm] == 0 {
			return v.failAt("confirm", "is required when style is danger")
		}
	case postTextObj:
		if !v.text(got[textObjText], 1, MaxTextChars, string(v.str(got[textObjType])) == "mrkdwn") {
			return v.up("text")
		}
	}
	return true
}

// check validates value t against s; on failure it records the error at the
// current path (which already names t) and returns false.
func (v *validator) check(t int32, s *spec) bool {
	tk := &v.toks[t]
	switch s.rule {
	case rText:
		return v.text(t, s.min, s.max, false)
	case rObject:
		return v.object(t, s.fields, s.post)
	case rArray:
		if s.reset {
			v.keys.reset()
		}
		return v.array(t, s.min, s.max, s.elem)
	case rEnum:
		if tk.Kind != jsontext.String {
			return v.fail("must be a string")
		}
		b := v.str(t)
		for _, n := range s.names {
			if string(b) == n {
				return true
			}
		}
		return v.fail(s.reason)
	case rNumber:
		if tk.Kind != jsontext.Number {
			return v.fail("must be a number")
		}
		// JSON has no Inf or NaN, but a literal beyond the float64 range
		// reads as Inf in every client.
		f, err := strconv.ParseFloat(string(v.raw[tk.Start:tk.End]), 64)
		if err != nil || math.IsInf(f, 0) {
			return v.fail("must be a finite number")
		}
		return true
	case rBool:
		if tk.Kind != jsontext.True && tk.Kind != jsontext.False {
			return v.fail("must be a boolean")
		}
		return true
	case rAccessory:
		k := v.element(t, accessoryKinds[:], accessoryTypeReason)
		if k == nil {
			return false
		}
		if k.interactive && !v.p.Interactive {
			v.skipKey = t - 1 // the "accessory" key; its value goes with it
		}
		return true
	case rElement:
		return v.element(t, elementKinds[:], elementTypeReason) != nil
	case rOptions:
		v.options.reset()
		return v.array(t, 1, s.max, option)
	}
	// The remaining rules take a string.
	if tk.Kind != jsontext.String {
		return v.fail("must be a string")
	}
	b := v.str(t)
	switch s.rule {
	case rBlockID:
		if !matchSet(b, &blockIDChars, 64) {
			return v.fail("must match ^[A-Za-z0-9_.-]{1,64}$")
		}
		if !v.addUnique(&v.blockIDs, t) {
			return v.fail("must be unique within the message")
		}
	case rActionID:
		if !matchSet(b, &actionIDChars, 255) {
			return v.fail("must match ^[A-Za-z0-9_.:-]{1,255}$")
		}
		if !v.addUnique(&v.actionIDs, t) {
			return v.fail("must be unique within the message")
		}
	case rKey:
		if !identLike(b) {
			return v.fail("must match ^[A-Za-z][A-Za-z0-9_]{0,39}$")
		}
		if !v.addUnique(&v.keys, t) {
			return v.fail(s.reason)
		}
	case rCurrency:
		if !isCurrency(b) {
			return v.fail("must be an active ISO 4217 currency code")
		}
	case rURL:
		if !v.text(t, 1, MaxTextChars, false) {
			return false
		}
		if r := urlReason(checkURL(v.str(t))); r != "" {
			return v.fail(r)
		}
	case rFile:
		// A file that does not exist and one that is not visible get the
		// same answer, so nothing is revealed.
		if !isUUID(b) {
			return v.fail("must be a UUID")
		}
		if v.p.FileVisible == nil || !v.p.FileVisible(string(b)) {
			return v.fail("must reference a file visible in this conversation")
		}
	case rOptionValue:
		if !v.text(t, s.min, s.max, false) {
			return false
		}
		if !v.addUnique(&v.options, t) {
			return v.fail("must be unique within the element")
		}
	}
	return true
}

func (v *validator) array(t int32, min, max int, elem *spec) bool {
	tk := &v.toks[t]
	if tk.Kind != jsontext.Array {
		return v.fail("must be an array")
	}
	if int(tk.N) < min {
		return v.fail("must have at least " + items(min))
	}
	if int(tk.N) > max {
		return v.fail("must have at most " + items(max))
	}
	i := int32(0)
	for j := t + 1; j < tk.Next; j = v.toks[j].Next {
		if !v.check(j, elem) {
			return v.upIndex(i)
		}
		i++
	}
	return true
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return strconv.Itoa(n) + " items"
}

// text checks a string token as text of min..max characters (at most
// MaxTextChars in any case), and as the mrkdwn subset when mrkdwn is set.
func (v *validator) text(t int32, min, max int, mrkdwn bool) bool {
	if v.toks[t].Kind != jsontext.String {
		return v.fail("must be a string")
	}
	b := v.str(t)
	if r := v.textReason(t, b, min, max); r != "" {
		return v.fail(r)
	}
	if mrkdwn {
		if r := checkMrkdwn(b); r != "" {
			return v.fail(r)
		}
	}
	return true
}

// textReason checks b, the decoded string token t, as text of min..max
// characters and never more than MaxTextChars. A string without escapes was
// measured by the tokenizer (raw control characters below 0x20 are not even
// valid JSON); only escaped ones are measured here.
func (v *validator) textReason(t int32, b []byte, min, max int) string {
	max = min2(max, MaxTextChars)
	tk := &v.toks[t]
	switch {
	case tk.Flags&jsontext.Escaped != 0:
		return checkText(b, min, max)
	case tk.Flags&jsontext.Control != 0:
		return ctrlReason
	}
	return lengthReason(int(tk.N), min, max)
}

// rows checks the rows of a table against the declared columns, whichever
// key comes first in the input.
func (v *validator) rows(t int32) bool {
	tk := &v.toks[t]
	if tk.Kind != jsontext.Array {
		return v.fail("must be an array")
	}
	if tk.N > maxRows {
		return v.fail("must have at most " + strconv.Itoa(maxRows) + " rows")
	}
	i := int32(0)
	for j := t + 1; j < tk.Next; j = v.toks[j].Next {
		if !v.row(j) {
			return v.upIndex(i)
		}
		i++
	}
	return true
}

func (v *validator) row(t int32) bool {
	tk := &v.toks[t]
	if tk.Kind != jsontext.Object {
		return v.fail("must be an object")
	}
	var seen uint8
	for j := t + 1; j < tk.Next; j = v.toks[j+1].Next {
		// A row's keys are column keys, which are input: a problem names
		// the row and the column's index, never the key.
		c := v.find(&v.keys, v.entry(j))
		if c < 0 {
			return v.fail("has a key that is not a declared column key")
		}
		col := "the value of columns[" + strconv.Itoa(c) + "] "
		switch {
		case seen&(1<<c) != 0:
			return v.fail("has a duplicate key (columns[" + strconv.Itoa(c) + "])")
		case v.toks[j+1].Kind != jsontext.String:
			return v.fail(col + "must be a string")
		}
		seen |= 1 << c
		if r := v.textReason(j+1, v.str(j+1), 0, 200); r != "" {
			return v.fail(col + r)
		}
	}
	return true
}
