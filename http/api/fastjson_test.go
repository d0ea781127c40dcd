package api

import (
	"reflect"
	"testing"

	"github.com/kitd/kitd/http/internal/input"
)

func TestPostBodyDecodeFastMatchesDecodeJSON(t *testing.T) {
	tests := []struct {
		name string
		body string
		fast bool // the fast path takes it
	}{
		{"the common body", `{"conversationId":"01a20000-0000-7000-8000-000000000002","text":"hello"}`, true},
		{"any key order and whitespace", " {\n\t\"text\" : \"hi\" ,\r\n \"conversationId\":\"c\", \"threadParentId\":\"p\" } ", true},
		{"null threadParentId and blocks", `{"text":"t","threadParentId":null,"blocks":null}`, true},
		{"an empty object", `{}`, true},
		{"a repeated key goes to the strict decoder", `{"text":"a","text":"b"}`, false},
		{"a repeated key with null last goes to the strict decoder", `{"text":"a","text":null}`, false},
		{"a repeated null key goes to the strict decoder", `{"threadParentId":null,"threadParentId":"p"}`, false},
		{"blocks go to encoding/json", `{"text":"t","blocks":[{"type":"divider"}]}`, false},
		{"escapes go to encoding/json", `{"text":"line\nbreak \"q\" \u00e9"}`, false},
		{"non-ASCII goes to encoding/json", `{"text":"héllo 🎉"}`, false},
		{"unknown keys go to encoding/json", `{"text":"t","extra":1}`, false},
		{"a case variant key goes to encoding/json", `{"Text":"t"}`, false},
		{"a number for text goes to encoding/json", `{"text":1}`, false},
		{"trailing data goes to encoding/json", `{"text":"t"} x`, false},
		{"a missing close goes to encoding/json", `{"text":"t"`, false},
		{"a trailing comma goes to encoding/json", `{"text":"t",}`, false},
		{"an array goes to encoding/json", `[]`, false},
		{"a control character goes to encoding/json", "{\"text\":\"a\x01\"}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fast postBody
			took := fast.decodeFast([]byte(tt.body))
			if took != tt.fast {
				t.Fatalf("fast path took it: %v, want %v", took, tt.fast)
			}
			if !took {
				return
			}
			var want postBody
			if err := input.DecodeJSON([]byte(tt.body), &want); err != nil {
				t.Fatalf("the fast path accepted what input.DecodeJSON refuses: %v", err)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast %+v, input.DecodeJSON %+v", fast, want)
			}
		})
	}
}

func TestHookPostBodyDecodeFastMatchesDecodeJSON(t *testing.T) {
	tests := []struct {
		name string
		body string
		fast bool // the fast path takes it
	}{
		{"the common body", `{"text":"deploy finished"}`, true},
		{"null blocks", `{"blocks":null,"text":"t"}`, true},
		{"null text", `{"text":null}`, true},
		{"an empty object", `{}`, true},
		{"a repeated key goes to the strict decoder", `{"text":"a","text":"b"}`, false},
		{"blocks go to encoding/json", `{"text":"t","blocks":[{"type":"divider"}]}`, false},
		{"keys the hooks host ignores go to encoding/json", `{"text":"t","channel":"#x","username":"u"}`, false},
		{"escapes go to encoding/json", `{"text":"a\"b"}`, false},
		{"non-ASCII goes to encoding/json", `{"text":"café"}`, false},
		{"a case variant key goes to encoding/json", `{"TEXT":"t"}`, false},
		{"a number for text goes to encoding/json", `{"text":1}`, false},
		{"trailing data goes to encoding/json", `{"text":"t"}{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fast hookPostBody
			took := fast.decodeFast([]byte(tt.body))
			if took != tt.fast {
				t.Fatalf("fast path took it: %v, want %v", took, tt.fast)
			}
			if !took {
				return
			}
			var want hookPostBody
			if err := input.DecodeJSON([]byte(tt.body), &want); err != nil {
				t.Fatalf("the fast path accepted what input.DecodeJSON refuses: %v", err)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast %+v, input.DecodeJSON %+v", fast, want)
			}
		})
	}
}
