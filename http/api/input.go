package api

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
)

// page is a parsed list request: how many items and where to continue.
type page struct {
	limit    int
	position string // from the cursor; "" for the first page
}

const (
	defaultLimit = 50
	maxLimit     = 200
	maxCursor    = 512
)

// parsePage reads `limit` and `cursor`. A cursor is bound to the list it
// was made for (list), so that one list's cursor is refused by another.
func parsePage(ctx *fasthttp.RequestCtx, list string, maxItems int) (page, error) {
	args := ctx.QueryArgs()
	p := page{limit: defaultLimit}
	limit, err := queryParam(args, "limit")
	if err != nil {
		return p, err
	}
	cursor, err := queryParam(args, "cursor")
	if err != nil {
		return p, err
	}
	if raw := limit; raw != nil {
		n, ok := plainDecimal(raw)
		if !ok || n < 1 || n > maxItems {
			return p, kiterr.Invalid("limit", "must be an integer from 1 to "+strconv.Itoa(maxItems))
		}
		p.limit = n
	}
	if raw := cursor; raw != nil {
		if len(raw) < 1 || len(raw) > maxCursor {
			return p, kiterr.Invalid("cursor", "must be 1 to 512 characters")
		}
		dec, err := base64.RawURLEncoding.DecodeString(string(raw))
		prefix := list + "|"
		if err != nil || !strings.HasPrefix(string(dec), prefix) || len(dec) == len(prefix) {
			return p, errNotThisList()
		}
		p.position = string(dec[len(prefix):])
	}
	return p, nil
}

// plainDecimal reads a positive integer written as one: ASCII digits, no
// sign and no leading zero (strconv.Atoi also takes "+5" and "05"), at most
// 9 of them so that it cannot overflow.
func plainDecimal(raw []byte) (int, bool) {
	if len(raw) == 0 || len(raw) > 9 || raw[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// queryParam is the query parameter name: nil when absent, empty when
// given without a value. Given twice it is refused: the first of two
// could be what one layer reads and the second what another does.
func queryParam(args *fasthttp.Args, name string) ([]byte, error) {
	switch values := args.PeekMulti(name); len(values) {
	case 0:
		return nil, nil
	case 1:
		if values[0] == nil {
			return []byte{}, nil
		}
		return values[0], nil
	default:
		return nil, kiterr.Invalid(name, "must be given once")
	}
}

// cursorFor makes the opaque cursor of position in list; nil ends the list.
func cursorFor(list, position string, more bool) *string {
	if !more {
		return nil
	}
	c := base64.RawURLEncoding.EncodeToString([]byte(list + "|" + position))
	return &c
}

// errNotThisList refuses a cursor this list did not give out.
func errNotThisList() error { return kiterr.Invalid("cursor", "is not a cursor of this list") }

// idPosition checks the position of a list that pages by id (users,
// conversations, members, the developer log): kitd only gives out ids
// there, and any other string would start the page somewhere, silently
// (an empty last page that ends the walk, or the first page again).
func idPosition(position string) error {
	if position != "" && !ids.Valid(position) {
		return errNotThisList()
	}
	return nil
}

func seqPosition(p page) (uint64, error) {
	if p.position == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(p.position, 10, 64)
	if err != nil || n == 0 {
		return 0, errNotThisList()
	}
	return n, nil
}

// decode reads a JSON object body into v. An empty body decodes as {} when
// emptyOK. Type errors name the field path; nothing of the input is echoed.
func decode(ctx *fasthttp.RequestCtx, v any, limit int, emptyOK bool) error {
	body := ctx.PostBody()
	if len(body) > limit {
		return kiterr.New(kiterr.PayloadTooLarge, "request body is larger than "+strconv.Itoa(limit)+" bytes")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return nil
		}
		return kiterr.Invalid("", "request body is required")
	}
	ct := string(ctx.Request.Header.ContentType())
	if mt, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return kiterr.New(kiterr.UnsupportedMedia, "Content-Type must be application/json")
	}
	if fd, ok := v.(fastDecoder); ok && fd.decodeFast(body) {
		return nil
	}
	return input.DecodeJSON(body, v)
}
