package manifest

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The schema in docs/manifest.schema.json and Parse must agree. This file
// checks it three ways: the keys and required keys of every object, the
// enumerations and limits against the Go lists, and the verdict (valid or
// not) on every rule row and testdata manifest, evaluated by the small JSON
// Schema 2020-12 evaluator below (the keywords the schema uses, no more).

const schemaFile = "../../docs/manifest.schema.json"

func loadSchema(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("$schema = %v", s["$schema"])
	}
	return s
}

// evaluator checks an instance against a schema. It knows the keywords in
// known and fails the test on any other, so the schema cannot silently use
// a keyword this test ignores.
type evaluator struct {
	t     testing.TB
	root  map[string]any
	regex map[string]*regexp.Regexp
}

var annotations = []string{"$schema", "$id", "$comment", "title", "description", "default", "format", "$defs"}

func (e *evaluator) valid(s any, v any) bool {
	switch s := s.(type) {
	case bool:
		return s
	case map[string]any:
		return e.validObj(s, v)
	}
	e.t.Fatalf("schema is neither object nor boolean: %v", s)
	return false
}

func (e *evaluator) validObj(s map[string]any, v any) bool {
	ok := true
	for _, k := range slices.Sorted(maps.Keys(s)) {
		kw := s[k]
		switch k {
		case "$ref":
			ok = ok && e.valid(e.resolve(kw.(string)), v)
		case "type":
			ok = ok && hasType(kw, v)
		case "enum":
			ok = ok && slices.ContainsFunc(kw.([]any), func(a any) bool { return jsonEqual(a, v) })
		case "const":
			ok = ok && jsonEqual(kw, v)
		case "allOf":
			for _, sub := range kw.([]any) {
				ok = ok && e.valid(sub, v)
			}
		case "if":
			branch := s["then"]
			if !e.valid(kw, v) {
				branch = s["else"]
			}
			if branch != nil {
				ok = ok && e.valid(branch, v)
			}
		case "then", "else":
		case "pattern", "minLength", "maxLength":
			if str, isStr := v.(string); isStr {
				switch k {
				case "pattern":
					ok = ok && e.re(kw.(string)).MatchString(str)
				case "minLength":
					ok = ok && utf8.RuneCountInString(str) >= int(kw.(float64))
				case "maxLength":
					ok = ok && utf8.RuneCountInString(str) <= int(kw.(float64))
				}
			}
		case "minimum", "maximum":
			if n, isNum := v.(float64); isNum {
				ok = ok && (k == "minimum" && n >= kw.(float64) || k == "maximum" && n <= kw.(float64))
			}
		case "properties", "additionalProperties", "required", "propertyNames", "minProperties":
			if o, isObj := v.(map[string]any); isObj {
				ok = ok && e.object(k, kw, s, o)
			}
		case "items", "minItems", "maxItems", "uniqueItems", "contains":
			if a, isArr := v.([]any); isArr {
				ok = ok && e.array(k, kw, a)
			}
		default:
			if !slices.Contains(annotations, k) {
				e.t.Fatalf("schema uses keyword %q that the test evaluator does not know", k)
			}
		}
	}
	return ok
}

func (e *evaluator) object(k string, kw any, s map[string]any, o map[string]any) bool {
	switch k {
	case "properties":
		for name, sub := range kw.(map[string]any) {
			if val, has := o[name]; has && !e.valid(sub, val) {
				return false
			}
		}
	case "additionalProperties":
		props, _ := s["properties"].(map[string]any)
		for name, val := range o {
			if _, declared := props[name]; !declared && !e.valid(kw, val) {
				return false
			}
		}
	case "required":
		for _, name := range kw.([]any) {
			if _, has := o[name.(string)]; !has {
				return false
			}
		}
	case "propertyNames":
		for name := range o {
			if !e.valid(kw, name) {
				return false
			}
		}
	case "minProperties":
		return len(o) >= int(kw.(float64))
	}
	return true
}

func (e *evaluator) array(k string, kw any, a []any) bool {
	switch k {
	case "items":
		for _, v := range a {
			if !e.valid(kw, v) {
				return false
			}
		}
	case "minItems":
		return len(a) >= int(kw.(float64))
	case "maxItems":
		return len(a) <= int(kw.(float64))
	case "uniqueItems":
		if kw.(bool) {
			for i := range a {
				for j := i + 1; j < len(a); j++ {
					if jsonEqual(a[i], a[j]) {
						return false
					}
				}
			}
		}
	case "contains":
		return slices.ContainsFunc(a, func(v any) bool { return e.valid(kw, v) })
	}
	return true
}

func (e *evaluator) resolve(ref string) any {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		e.t.Fatalf("unsupported $ref %q", ref)
	}
	s, ok := e.root["$defs"].(map[string]any)[name]
	if !ok {
		e.t.Fatalf("$ref %q names no definition", ref)
	}
	return s
}

// re compiles a pattern. ECMA-262 and RE2 agree on the subset the schema
// uses (classes, groups, (?:...), anchors, counted repetition), and the
// patterns are unanchored as JSON Schema says.
func (e *evaluator) re(p string) *regexp.Regexp {
	if r, ok := e.regex[p]; ok {
		return r
	}
	r, err := regexp.Compile(p)
	if err != nil {
		e.t.Fatalf("pattern %q: %v", p, err)
	}
	e.regex[p] = r
	return r
}

func hasType(kw any, v any) bool {
	switch kw {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == math.Trunc(n)
	case "number":
		_, ok := v.(float64)
		return ok
	}
	return false
}

func jsonEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

func schemaValid(t testing.TB, e *evaluator, text string) bool {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("instance is not JSON: %v", err)
	}
	return e.valid(any(e.root), v)
}

func newEvaluator(t testing.TB) *evaluator {
	return &evaluator{t: t, root: loadSchema(t), regex: map[string]*regexp.Regexp{}}
}

// TestSchemaAgreesWithParseOnEveryRule evaluates the schema on every rule
// row (except raw-text rows: duplicate keys and broken JSON are below what
// a schema sees) and every testdata manifest.
func TestSchemaAgreesWithParseOnEveryRule(t *testing.T) {
	e := newEvaluator(t)
	rows := ruleRows(t)
	// Each event kind with bot scopes that lack what it needs, and without
	// a bot at all: the schema's per-scope rules must match eventKinds.
	for _, k := range eventKinds {
		rows = append(rows,
			ruleRow{name: "event " + k.name + " with a bot without read scopes", base: every, edit: all(edit("bot.scopes", arr("incoming-webhook")), edit("events", arr(k.name))),
				want: map[bool][]string{true: {"x"}}[k.needs != "" && k.needs != "bot"]},
			ruleRow{name: "event " + k.name + " without a bot", base: every, edit: all(edit("bot", deleted), edit("incomingWebhooks", deleted), edit("events", arr(k.name))),
				want: map[bool][]string{true: {"x"}}[k.needs != ""]})
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		rows = append(rows, ruleRow{name: "file " + f, raw: readFile(t, filepath.Base(f))})
	}
	checked := 0
	for _, row := range rows {
		if row.raw != "" && !strings.HasPrefix(row.name, "file ") {
			continue
		}
		text := row.text(t)
		_, problems := Parse(text)
		if !strings.HasPrefix(row.name, "file ") && (len(problems) == 0) != (row.want == nil) {
			t.Fatalf("%s: the rule row itself fails: %+v", row.name, problems)
		}
		parseOK := len(problems) == 0
		schemaOK := schemaValid(t, e, text)
		checked++
		switch {
		case row.schemaLooser && (parseOK || !schemaOK):
			t.Errorf("%s: marked as a rule the schema cannot express, but Parse valid = %v, schema valid = %v", row.name, parseOK, schemaOK)
		case !row.schemaLooser && parseOK != schemaOK:
			t.Errorf("%s: Parse valid = %v, schema valid = %v (problems %+v)", row.name, parseOK, schemaOK, problems)
		}
	}
	if checked < 250 {
		t.Fatalf("only %d manifests checked", checked)
	}
}

// schemaObjects walks the schema and returns every object it describes with
// fixed keys (additionalProperties false), by path with "[]" for array
// items: its property names and its required ones. Language maps are
// objects with free keys and are not listed, as Parse's objects are not.
func schemaObjects(t *testing.T, e *evaluator) map[string][2][]string {
	out := map[string][2][]string{}
	var walk func(path string, s any)
	walk = func(path string, s any) {
		m, ok := s.(map[string]any)
		if !ok {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			walk(path, e.resolve(ref))
		}
		if props, ok := m["properties"].(map[string]any); ok {
			if m["additionalProperties"] != false {
				t.Errorf("schema object %q allows unknown keys", path)
			}
			var req []string
			for _, r := range asSlice(m["required"]) {
				req = append(req, r.(string))
			}
			slices.Sort(req)
			out[path] = [2][]string{slices.Sorted(maps.Keys(props)), req}
			for k, sub := range props {
				walk(join(path, k), sub)
			}
		}
		if items, ok := m["items"]; ok {
			walk(path+"[]", items)
		}
	}
	walk("", e.root)
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// TestSchemaListsTheKeysParseAccepts compares the objects Parse checks in
// everything.json (which has every key) with the schema's objects.
func TestSchemaListsTheKeysParseAccepts(t *testing.T) {
	e := newEvaluator(t)
	root, err := parseTree(readFile(t, every))
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{shape: map[string][]field{}}
	if c.manifest(root); len(c.problems) > 0 {
		t.Fatalf("problems: %+v", c.problems)
	}
	parsed := map[string][2][]string{}
	for path, fields := range c.shape {
		var keys, req []string
		for _, f := range fields {
			keys = append(keys, f.name)
			if f.required {
				req = append(req, f.name)
			}
		}
		slices.Sort(keys)
		slices.Sort(req)
		parsed[path] = [2][]string{keys, req}
	}
	schema := schemaObjects(t, e)
	for _, path := range slices.Sorted(maps.Keys(schema)) {
		p, ok := parsed[path]
		switch {
		case !ok:
			t.Errorf("schema object %q is not an object Parse checks (or everything.json lacks it)", path)
		case !slices.Equal(p[0], schema[path][0]):
			t.Errorf("object %q: Parse accepts keys %q, schema lists %q", path, p[0], schema[path][0])
		case !slices.Equal(p[1], schema[path][1]):
			t.Errorf("object %q: Parse requires %q, schema requires %q", path, p[1], schema[path][1])
		}
	}
	for path := range parsed {
		if _, ok := schema[path]; !ok {
			t.Errorf("Parse checks object %q, the schema does not describe it", path)
		}
	}
	if len(parsed) < 10 {
		t.Fatalf("only %d objects recorded: %q", len(parsed), slices.Sorted(maps.Keys(parsed)))
	}
}

// TestSchemaEnumsAndLimitsMatchGo compares the schema's enumerations and
// list limits with the Go lists and constants they come from.
func TestSchemaEnumsAndLimitsMatchGo(t *testing.T) {
	e := newEvaluator(t)
	props := e.root["properties"].(map[string]any)
	at := func(path ...string) map[string]any {
		var cur any = props
		for _, p := range path {
			m := cur.(map[string]any)
			if ref, ok := m["$ref"].(string); ok && p != "$ref" {
				m = e.resolve(ref).(map[string]any)
			}
			cur = m[p]
		}
		m := cur.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m = e.resolve(ref).(map[string]any)
		}
		return m
	}
	strList := func(v any) []string {
		var out []string
		for _, s := range asSlice(v) {
			out = append(out, s.(string))
		}
		return out
	}
	var userScopes []string
	for _, s := range knownScopes {
		if !botOnlyScopes[s] {
			userScopes = append(userScopes, s)
		}
	}
	enums := []struct {
		name string
		got  []string
		want []string
	}{
		{"bot scopes", strList(at("bot", "properties", "scopes", "items")["enum"]), knownScopes},
		{"user scopes", strList(at("oauth", "properties", "userScopes", "items")["enum"]), userScopes},
		{"events", strList(at("events", "items")["enum"]), EventKinds()},
		{"categories", strList(at("categories", "items")["enum"]), categories},
		{"tool access", strList(at("tools", "items", "properties", "access")["enum"]), toolAccess},
		{"tool data class", strList(at("tools", "items", "properties", "dataClass")["enum"]), toolDataClass},
		{"tool audience", strList(at("tools", "items", "properties", "audience")["enum"]), toolAudience},
		{"model data policy", strList(at("modelDataPolicy")["enum"]), modelDataPolicies},
		{"distribution", strList(at("distribution")["enum"]), distributions},
	}
	for _, en := range enums {
		if !slices.Equal(en.got, en.want) {
			t.Errorf("%s: schema %q, Go %q", en.name, en.got, en.want)
		}
	}
	limits := []struct {
		name string
		got  any
		want int
	}{
		{"tools", at("tools")["maxItems"], MaxTools},
		{"commands", at("commands")["maxItems"], MaxCommands},
		{"categories", at("categories")["maxItems"], MaxCategories},
		{"events", at("events")["maxItems"], len(eventKinds)},
		{"bot scopes", at("bot", "properties", "scopes")["maxItems"], maxScopes},
		{"redirect URLs", at("oauth", "properties", "redirectUrls")["maxItems"], maxRedirects},
		{"external scopes", at("externalAuth", "properties", "requiredScopes")["maxItems"], MaxProviderScopes},
		{"webhooks", at("incomingWebhooks", "properties", "maxPerInstallation")["maximum"], maxWebhooks},
	}
	for _, l := range limits {
		if f, ok := l.got.(float64); !ok || int(f) != l.want {
			t.Errorf("%s: schema %v, Go %d", l.name, l.got, l.want)
		}
	}
	for name, re := range map[string]*regexp.Regexp{"tool name": toolNameRe, "command name": commandNameRe} {
		var p string
		if name == "tool name" {
			p, _ = at("tools", "items", "properties", "name")["pattern"].(string)
		} else {
			p, _ = at("commands", "items", "properties", "name")["pattern"].(string)
		}
		if p != re.String() {
			t.Errorf("%s pattern: schema %q, Go %q", name, p, re.String())
		}
	}
}
