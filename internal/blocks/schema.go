package blocks

import (
	"math"
	"strconv"
	"strings"
)

// Limits of single elements: SPEC.md section 2, and docs/blocks.md where
// SPEC.md is silent.
const (
	maxOptions = 100 // options of a static_select
	maxColumns = 6   // columns of a table
	maxRows    = 20  // rows of a table
	maxFields  = 8   // keys of the largest object kind (a button has 7)
)

// check validates the value token t; on failure it records the error at the
// current path (which already names t) and returns false.
type check func(v *validator, t int32) bool

// field is one allowed key of an object.
type field struct {
	name     string
	required bool
	check    check // nil: checked elsewhere (the "type" key, or the kind's post step)
}

// vals holds, per field index, the value token of the key, or 0 when absent
// (token 0 is the blocks array itself, never a member).
type vals [maxFields]int32

// kindSpec describes one `type` of block or element.
type kindSpec struct {
	name   string
	fields []field
	// post runs once the keys are individually valid, for rules that span
	// keys; the path is that of the object.
	post func(v *validator, got vals) bool
	// interactive: an actions block, or a button, select or overflow menu.
	interactive bool
}

var (
	typeField    = field{name: "type", required: true}
	blockIDField = field{name: "blockId", check: blockID}
)

// Block kinds (SPEC.md section 2). The index constants name the fields a
// post step reads.
var blockKinds = [...]kindSpec{
	{name: "header", fields: []field{typeField, blockIDField,
		{name: "text", required: true, check: plain(1, 150)},
	}},
	{name: "section", fields: []field{typeField, blockIDField,
		{name: "text", required: true, check: textObject},
		{name: "accessory", check: accessory},
	}},
	{name: "fields", fields: []field{typeField, blockIDField,
		{name: "fields", required: true, check: arrayOf(1, 10, objectOf([]field{
			{name: "label", required: true, check: plain(1, 60)},
			{name: "value", required: true, check: plain(1, 200)},
		}, nil))},
	}},
	{name: "metrics", fields: []field{typeField, blockIDField,
		{name: "items", required: true, check: resetKeys(arrayOf(1, 4, objectOf(metricFields, metricPost)))},
	}},
	{name: "table", fields: []field{typeField, blockIDField,
		{name: "columns", required: true, check: resetKeys(arrayOf(1, maxColumns, objectOf([]field{
			{name: "key", required: true, check: key("must be unique within the table")},
			{name: "label", required: true, check: plain(1, 60)},
			{name: "align", required: true, check: enum("left", "center", "right")},
		}, nil)))},
		{name: "rows", required: true}, // needs the columns: checked by tablePost
	}, post: tablePost},
	{name: "list", fields: []field{typeField, blockIDField,
		{name: "items", required: true, check: arrayOf(1, 20, objectOf([]field{
			{name: "title", required: true, check: plain(1, 150)},
			{name: "subtitle", check: plain(1, 300)},
			{name: "url", check: httpsURL},
		}, nil))},
	}},
	{name: "context", fields: []field{typeField, blockIDField,
		{name: "elements", required: true, check: arrayOf(1, 10, textObject)},
	}},
	{name: "divider", fields: []field{typeField, blockIDField}},
	{name: "image", fields: []field{typeField, blockIDField,
		{name: "fileId", required: true, check: fileRef},
		{name: "alt", required: true, check: plain(1, 200)},
	}},
	{name: "actions", interactive: true, fields: []field{typeField, blockIDField,
		{name: "elements", required: true, check: arrayOf(1, 5, actionElement)},
	}},
}

const tableRows = 3 // index of "rows" in the table kind's fields

var metricFields = []field{
	{name: "key", required: true, check: key("must be unique within the block")},
	{name: "label", required: true, check: plain(1, 60)},
	{name: "value", required: true, check: number},
	{name: "format", check: enum("integer", "decimal", "currency", "percent")},
	{name: "currency", check: currency},
	{name: "primary", required: true, check: boolean},
}

const (
	metricFormat   = 3
	metricCurrency = 4
)

// Interactive elements, and the image accessory.
var (
	buttonKind = kindSpec{name: "button", interactive: true, post: buttonPost, fields: []field{typeField,
		{name: "actionId", required: true, check: actionID},
		{name: "text", required: true, check: plain(1, 75)},
		{name: "value", check: plain(0, 2000)},
		{name: "style", check: enum("default", "primary", "danger")},
		{name: "url", check: httpsURL},
		{name: "confirm", check: confirmObject},
	}}
	selectKind = kindSpec{name: "static_select", interactive: true, fields: []field{typeField,
		{name: "actionId", required: true, check: actionID},
		{name: "placeholder", check: plain(1, 150)},
		{name: "options", required: true, check: optionsOf(maxOptions)},
		{name: "confirm", check: confirmObject},
	}}
	overflowKind = kindSpec{name: "overflow", interactive: true, fields: []field{typeField,
		{name: "actionId", required: true, check: actionID},
		{name: "options", required: true, check: optionsOf(5)},
		{name: "confirm", check: confirmObject},
	}}
	imageAccessoryKind = kindSpec{name: "image", fields: []field{typeField,
		{name: "fileId", required: true, check: fileRef},
		{name: "alt", required: true, check: plain(1, 200)},
	}}

	elementKinds   = [...]kindSpec{buttonKind, selectKind, overflowKind}
	accessoryKinds = [...]kindSpec{imageAccessoryKind, buttonKind, selectKind, overflowKind}
)

const (
	buttonStyle   = 4
	buttonConfirm = 6
)

var (
	optionFields = []field{
		{name: "text", required: true, check: plain(1, 75)},
		{name: "value", required: true, check: optionValue},
	}
	confirmObject = objectOf([]field{
		{name: "title", required: true, check: plain(1, 100)},
		{name: "text", required: true, check: plain(1, 300)},
		{name: "confirm", required: true, check: plain(1, 30)},
		{name: "deny", required: true, check: plain(1, 30)},
	}, nil)
	textObjectFields = []field{
		{name: "type", required: true, check: enum("plain", "mrkdwn")},
		{name: "text", required: true}, // checked by textObject once the type is known
	}
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
			v.skip = append(v.skip, t)
		}
	}
	return v.kindObject(t, k)
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
	if !v.kindObject(t, k) {
		return nil
	}
	return k
}

func (v *validator) kindObject(t int32, k *kindSpec) bool {
	got, ok := v.object(t, k.fields)
	if !ok {
		return false
	}
	return k.post == nil || k.post(v, got)
}

// kindOf resolves the "type" of object t among kinds.
func (v *validator) kindOf(t int32, kinds []kindSpec, reason string) *kindSpec {
	if v.toks[t].kind != kObject {
		v.fail("must be an object")
		return nil
	}
	tt := v.member(t, "type")
	switch {
	case tt == 0:
		v.failAt("type", "is required")
		return nil
	case v.toks[tt].kind != kString:
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
// most once, not null, valid, and that the required ones are present. Keys
// are checked in document order, so the first problem is the first in the
// input.
func (v *validator) object(t int32, fields []field) (got vals, ok bool) {
	tk := &v.toks[t]
	if tk.kind != kObject {
		return got, v.fail("must be an object")
	}
	for j := t + 1; j < tk.next; j = v.toks[j+1].next {
		name := v.str(j)
		fi := -1
		for x := range fields {
			if string(name) == fields[x].name {
				fi = x
				break
			}
		}
		if fi < 0 {
			return got, v.unknownKey(name, "is not an allowed key", "has a key that is not allowed")
		}
		f := &fields[fi]
		val := j + 1
		switch {
		case got[fi] != 0:
			return got, v.failAt(f.name, "is a duplicate key")
		case v.toks[val].kind == kNull:
			return got, v.failAt(f.name, "must not be null; omit the key instead")
		}
		got[fi] = val
		if f.check != nil {
			v.pushKey(f.name)
			if !f.check(v, val) {
				return got, false
			}
			v.pop()
		}
	}
	for x := range fields {
		if fields[x].required && got[x] == 0 {
			return got, v.failAt(fields[x].name, "is required")
		}
	}
	return got, true
}

// unknownKey reports a key that is not allowed. The key is named in the path
// only when it looks like an identifier: keys are input too, and an
// arbitrary one could be long or carry anything.
func (v *validator) unknownKey(name []byte, named, anonymous string) bool {
	if identLike(name) {
		return v.failAt(string(name), named)
	}
	return v.fail(anonymous)
}

func (v *validator) array(t int32, min, max int, elem check) bool {
	tk := &v.toks[t]
	if tk.kind != kArray {
		return v.fail("must be an array")
	}
	if int(tk.size) < min {
		return v.fail("must have at least " + items(min))
	}
	if int(tk.size) > max {
		return v.fail("must have at most " + items(max))
	}
	i := int32(0)
	for j := t + 1; j < tk.next; j = v.toks[j].next {
		v.pushIndex(i)
		if !elem(v, j) {
			return false
		}
		v.pop()
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
	if v.toks[t].kind != kString {
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
	case tk.flags&fEsc != 0:
		return checkText(b, min, max)
	case tk.flags&fCtrl != 0:
		return ctrlReason
	}
	return lengthReason(int(tk.chars), min, max)
}

// Check constructors and checks, in the order the tables use them.

func plain(min, max int) check {
	return func(v *validator, t int32) bool { return v.text(t, min, max, false) }
}

func arrayOf(min, max int, elem check) check {
	return func(v *validator, t int32) bool { return v.array(t, min, max, elem) }
}

func objectOf(fields []field, post func(v *validator, got vals) bool) check {
	return func(v *validator, t int32) bool {
		got, ok := v.object(t, fields)
		return ok && (post == nil || post(v, got))
	}
}

func enum(names ...string) check {
	reason := "must be one of: " + strings.Join(names, ", ")
	return func(v *validator, t int32) bool {
		if v.toks[t].kind != kString {
			return v.fail("must be a string")
		}
		s := v.str(t)
		for _, n := range names {
			if string(s) == n {
				return true
			}
		}
		return v.fail(reason)
	}
}

// resetKeys starts a new set of metric or column keys for the block.
func resetKeys(c check) check {
	return func(v *validator, t int32) bool {
		v.keys = v.keys[:0]
		return c(v, t)
	}
}

func blockID(v *validator, t int32) bool {
	if v.toks[t].kind != kString {
		return v.fail("must be a string")
	}
	if !matchSet(v.str(t), &blockIDChars, 64) {
		return v.fail("must match ^[A-Za-z0-9_.-]{1,64}$")
	}
	if !v.addUnique(&v.blockIDs, t) {
		return v.fail("must be unique within the message")
	}
	return true
}

func actionID(v *validator, t int32) bool {
	if v.toks[t].kind != kString {
		return v.fail("must be a string")
	}
	if !matchSet(v.str(t), &actionIDChars, 255) {
		return v.fail("must match ^[A-Za-z0-9_.:-]{1,255}$")
	}
	if !v.addUnique(&v.actionIDs, t) {
		return v.fail("must be unique within the message")
	}
	return true
}

// key checks a metric or column key, unique within its block.
func key(dup string) check {
	return func(v *validator, t int32) bool {
		if v.toks[t].kind != kString {
			return v.fail("must be a string")
		}
		if !identLike(v.str(t)) {
			return v.fail("must match ^[A-Za-z][A-Za-z0-9_]{0,39}$")
		}
		if !v.addUnique(&v.keys, t) {
			return v.fail(dup)
		}
		return true
	}
}

func metricPost(v *validator, got vals) bool {
	isCurrency := got[metricFormat] != 0 && string(v.str(got[metricFormat])) == "currency"
	switch {
	case isCurrency && got[metricCurrency] == 0:
		return v.failAt("currency", "is required when format is currency")
	case !isCurrency && got[metricCurrency] != 0:
		return v.failAt("currency", "is allowed only when format is currency")
	}
	return true
}

func number(v *validator, t int32) bool {
	tk := &v.toks[t]
	if tk.kind != kNumber {
		return v.fail("must be a number")
	}
	// JSON has no Inf or NaN, but a literal beyond float64 range reads as
	// Inf in every client.
	f, err := strconv.ParseFloat(string(v.raw[tk.start:tk.end()]), 64)
	if err != nil || math.IsInf(f, 0) {
		return v.fail("must be a finite number")
	}
	return true
}

func boolean(v *validator, t int32) bool {
	if k := v.toks[t].kind; k != kTrue && k != kFalse {
		return v.fail("must be a boolean")
	}
	return true
}

func currency(v *validator, t int32) bool {
	if v.toks[t].kind != kString {
		return v.fail("must be a string")
	}
	if !isCurrency(v.str(t)) {
		return v.fail("must be an active ISO 4217 currency code")
	}
	return true
}

// tablePost checks the rows against the declared columns, whichever key
// comes first in the input.
func tablePost(v *validator, got vals) bool {
	t := got[tableRows]
	v.pushKey("rows")
	tk := &v.toks[t]
	if tk.kind != kArray {
		return v.fail("must be an array")
	}
	if tk.size > maxRows {
		return v.fail("must have at most " + strconv.Itoa(maxRows) + " rows")
	}
	i := int32(0)
	for j := t + 1; j < tk.next; j = v.toks[j].next {
		v.pushIndex(i)
		if !v.row(j) {
			return false
		}
		v.pop()
		i++
	}
	v.pop()
	return true
}

func (v *validator) row(t int32) bool {
	tk := &v.toks[t]
	if tk.kind != kObject {
		return v.fail("must be an object")
	}
	var seen uint8
	for j := t + 1; j < tk.next; j = v.toks[j+1].next {
		c := v.indexOf(v.keys, j)
		if c < 0 {
			return v.unknownKey(v.str(j), "is not a declared column key", "has a key that is not a declared column key")
		}
		// Column keys match identLike, so naming them in a path is safe.
		switch {
		case seen&(1<<c) != 0:
			return v.failAt(string(v.str(j)), "is a duplicate key")
		case v.toks[j+1].kind != kString:
			return v.failAt(string(v.str(j)), "must be a string")
		}
		seen |= 1 << c
		if r := v.textReason(j+1, v.str(j+1), 0, 200); r != "" {
			return v.failAt(string(v.str(j)), r)
		}
	}
	return true
}

func httpsURL(v *validator, t int32) bool {
	if !v.text(t, 1, MaxTextChars, false) {
		return false
	}
	if r := urlReason(checkURL(v.str(t))); r != "" {
		return v.fail(r)
	}
	return true
}

// fileRef checks an image's fileId. A file that does not exist and one that
// is not visible get the same answer, so nothing is revealed.
func fileRef(v *validator, t int32) bool {
	if v.toks[t].kind != kString {
		return v.fail("must be a string")
	}
	b := v.str(t)
	if !isUUID(b) {
		return v.fail("must be a UUID")
	}
	if v.p.FileVisible == nil || !v.p.FileVisible(string(b)) {
		return v.fail("must reference a file visible in this conversation")
	}
	return true
}

func textObject(v *validator, t int32) bool {
	got, ok := v.object(t, textObjectFields)
	if !ok {
		return false
	}
	mrkdwn := string(v.str(got[0])) == "mrkdwn"
	v.pushKey("text")
	if !v.text(got[1], 1, MaxTextChars, mrkdwn) {
		return false
	}
	v.pop()
	return true
}

func accessory(v *validator, t int32) bool {
	k := v.element(t, accessoryKinds[:], accessoryTypeReason)
	if k == nil {
		return false
	}
	if k.interactive && !v.p.Interactive {
		v.skip = append(v.skip, t-1) // the "accessory" key; its value goes with it
	}
	return true
}

func actionElement(v *validator, t int32) bool {
	return v.element(t, elementKinds[:], elementTypeReason) != nil
}

func buttonPost(v *validator, got vals) bool {
	if got[buttonStyle] != 0 && string(v.str(got[buttonStyle])) == "danger" && got[buttonConfirm] == 0 {
		return v.failAt("confirm", "is required when style is danger")
	}
	return true
}

func optionsOf(max int) check {
	return func(v *validator, t int32) bool {
		v.options = v.options[:0]
		return v.array(t, 1, max, option)
	}
}

func option(v *validator, t int32) bool {
	_, ok := v.object(t, optionFields)
	return ok
}

func optionValue(v *validator, t int32) bool {
	if !v.text(t, 1, 150, false) {
		return false
	}
	if !v.addUnique(&v.options, t) {
		return v.fail("must be unique within the element")
	}
	return true
}
