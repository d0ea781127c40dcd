package kiterr

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kitd/kitd/internal/limits"
	"github.com/kitd/kitd/proto/kitpb"
)

// specStatus is docs/api.md "Errors" plus the codes the spec lists without a
// condition, as docs/decisions.md and OPERATIONS.md give them a status.
var specStatus = map[Code]int{
	"validation_error":       400,
	"invalid_token":          401,
	"missing_scope":          403,
	"forbidden":              403,
	"not_found":              404,
	"idempotency_conflict":   409,
	"conflict":               409,
	"gone":                   410,
	"payload_too_large":      413,
	"rate_limited":           429,
	"internal_error":         500,
	"kit_unavailable":        502,
	"unsupported_media_type": 415,
	"csrf_rejected":          403,
	"invalid_credentials":    401,
	"email_taken":            409,
	"name_taken":             409,
	"slug_taken":             409,
	"unauthenticated":        401, // OPERATIONS.md section 6
	// kitd's own codes (docs/decisions.md "Request heads").
	"uri_too_long":     414,
	"header_too_large": 431,
	"unavailable":      503, // docs/decisions.md "Unavailable"
}

// declaredCodes reads the Code constants declared in package kiterr, so that
// a code added there cannot miss the status table.
func declaredCodes(t *testing.T) map[string]Code {
	t.Helper()
	dir := "."
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]Code{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s is not a string literal", name.Name)
					}
					codes[name.Name] = Code(strings.Trim(lit.Value, "\"`"))
				}
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal("found no kiterr codes")
	}
	return codes
}

func TestStatuses(t *testing.T) {
	for name, code := range declaredCodes(t) {
		t.Run(name, func(t *testing.T) {
			got, ok := statuses[code]
			if !ok {
				t.Fatalf("statuses has no status for %s", code)
			}
			want, known := specStatus[code]
			if !known {
				t.Fatalf("%s is not an error code of docs/api.md, Errors", code)
			}
			if got != want {
				t.Fatalf("statuses[%s] = %d, want %d", code, got, want)
			}
		})
	}
	t.Run("every status in the table is an error status", func(t *testing.T) {
		for code, status := range statuses {
			if status < 400 || status > 599 {
				t.Errorf("%s maps to %d", code, status)
			}
		}
	})
}

func TestCodeStatus(t *testing.T) {
	tests := []struct {
		name string
		code Code
		want int
	}{
		{"no code is a success", "", 200},
		{"a listed code has its status", Conflict, 409},
		{"a code the API does not list is 500", "no_such_code", 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.code.Status(); got != tt.want {
				t.Fatalf("Status() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCodeRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		code Code
		want int
	}{
		{"unavailable asks for a retry after 1 s", Unavailable, 1},
		{"rate_limited takes its bucket's, not the code's", RateLimited, 0},
		{"other codes carry none", NotFound, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.code.RetryAfter(); got != tt.want {
				t.Fatalf("RetryAfter() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestErrorRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want int
	}{
		{"a refusing bucket's wait is the answer's", &Error{Code: RateLimited, Limit: &limits.Decision{RetryAfter: 7}}, 7},
		{"a refusing bucket asks for at least 1 s", &Error{Code: RateLimited, Limit: &limits.Decision{}}, 1},
		{"without a bucket the code's wait is the answer's", New(Unavailable, "no leader"), 1},
		{"other errors carry none", Absent("kit"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.RetryAfter(); got != tt.want {
				t.Fatalf("RetryAfter() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFailureRoundTrip(t *testing.T) {
	limited := OverLimit(limits.Decision{Remaining: 0, RetryAfter: 0, ResetSeconds: 60, Policy: limits.Write})
	tests := []struct {
		name string
		err  error
		want Error
	}{
		{"a validation error keeps its path and message", Invalid("blocks[2].text", "must not be blank"),
			Error{Code: Validation, Path: "blocks[2].text", Message: "blocks[2].text: must not be blank"}},
		{"a wrapped domain error crosses as itself", errors.Join(errors.New("context"), Absent("webhook")),
			Error{Code: NotFound, Message: "webhook not found"}},
		{"a rate limit keeps its bucket, with Retry-After at least 1", limited,
			Error{Code: RateLimited, Message: "rate limit write exceeded", Limit: &limits.Decision{RetryAfter: 1, ResetSeconds: 60, Policy: limits.Write}}},
		{"an error after a spent token keeps the bucket's state, and is no refusal",
			Spending(Invalid("text", "is required"), spentWebhook.Wire()),
			Error{Code: Validation, Path: "text", Message: "text: is required", Spent: &spentWebhook}},
		{"any other error is internal", errors.New("disk on fire"),
			Error{Code: Internal, Message: "disk on fire"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromFailure(ToFailure(tt.err))
			if got.Code != tt.want.Code || got.Message != tt.want.Message || got.Path != tt.want.Path {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if (got.Limit == nil) != (tt.want.Limit == nil) || got.Limit != nil && *got.Limit != *tt.want.Limit {
				t.Fatalf("limit %+v, want %+v", got.Limit, tt.want.Limit)
			}
			if (got.Spent == nil) != (tt.want.Spent == nil) || got.Spent != nil && *got.Spent != *tt.want.Spent {
				t.Fatalf("spent %+v, want %+v", got.Spent, tt.want.Spent)
			}
		})
	}
}

var spentWebhook = limits.Decision{OK: true, Remaining: 4, ResetSeconds: 1, Policy: limits.Webhook}

// docs/decisions.md "Rate limits": an error answered after a token was
// taken shows that bucket; a refusal keeps its own, and a shared
// sentinel error is never changed.
func TestSpending(t *testing.T) {
	sentinel := Absent("webhook")
	limited := OverLimit(limits.Decision{Policy: limits.PostMessage})
	tests := []struct {
		rule      string
		err       error
		d         *limits.Decision
		wantSpent bool
	}{
		{"a domain error gets the bucket's state", sentinel, &spentWebhook, true},
		{"limits off (no decision) change nothing", sentinel, nil, false},
		{"a refusal over another limit keeps its own bucket alone", limited, &spentWebhook, false},
		{"an error that is not a domain error is left as it is", errors.New("disk on fire"), &spentWebhook, false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			var w *kitpb.Decision
			if tt.d != nil {
				w = tt.d.Wire()
			}
			got := Spending(tt.err, w)
			var e *Error
			if errors.As(got, &e) && (e.Spent != nil) != tt.wantSpent {
				t.Fatalf("Spent %+v, want set: %v", e.Spent, tt.wantSpent)
			}
			if !errors.As(got, &e) && tt.wantSpent {
				t.Fatalf("%v is no domain error", got)
			}
			if sentinel.Spent != nil {
				t.Fatal("the shared error was changed")
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"a validation error names its path once", Invalid("blocks[0].text", "must not be blank"), "validation_error: blocks[0].text: must not be blank"},
		{"a path the message does not start with is added", &Error{Code: Conflict, Message: "no", Path: "userId"}, "conflict: userId: no"},
		{"an error without a path is its code and message", Absent("webhook"), "not_found: webhook not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnexplained(t *testing.T) {
	unavailable := New(Unavailable, "retry")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"an unavailable answer with its cause around it", fmt.Errorf("commit to partition 3: %w", unavailable), true},
		{"a bare unavailable answer says all there is", unavailable, false},
		{"another code's cause is not this log's", fmt.Errorf("load: %w", Absent("user")), false},
		{"not a domain error (logged as internal)", errors.New("disk"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unexplained(tc.err); got != tc.want {
				t.Fatalf("Unexplained(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
