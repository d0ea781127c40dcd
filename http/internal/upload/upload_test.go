package upload

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
)

// pngHeader is the start of a PNG file.
var pngHeader = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13}

// wholeBodyUpload is how POST /files read its body before uploads were
// streamed: the whole body decoded at once, then the fields, then the
// content (the former decodeContent, kept verbatim). The streamed reader must
// give every answer it gives.
func wholeBodyUpload(body []byte) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, kiterr.Invalid("", "request body is required")
	}
	var b Body
	if err := input.DecodeJSON(body, &b); err != nil {
		return nil, err
	}
	if err := input.FirstError(
		input.RequireUUID("conversationId", b.ConversationID),
		fileName(b.Name),
		requireEnum("mimeType", b.MimeType, mimeTypes...),
	); err != nil {
		return nil, err
	}
	raw, mimeType := b.ContentBase64.raw, *b.MimeType
	const path = "contentBase64"
	if len(raw) == 0 || string(raw) == "null" {
		return nil, kiterr.Invalid(path, "is required")
	}
	if raw[0] != '"' {
		return nil, kiterr.Invalid(path, "must be of type string")
	}
	text := raw[1 : len(raw)-1]
	if bytes.IndexByte(text, '\\') >= 0 {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, kiterr.Invalid(path, "must be of type string")
		}
		text = []byte(str)
	}
	if len(text) < minContentBase64 || len(text) > maxContentBase64 {
		return nil, kiterr.Invalid(path, "must be 4 to 7000000 characters")
	}
	pad := 0
	for i, c := range text {
		switch {
		case c == '=' && i >= len(text)-2:
			pad++
		case pad == 0 && (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'):
		default:
			return nil, kiterr.Invalid(path, "must match ^[A-Za-z0-9+/]+={0,2}$")
		}
	}
	if pad == len(text) || len(text)%4 != 0 {
		return nil, kiterr.Invalid(path, "is not valid padded base64")
	}
	size := len(text)/4*3 - pad
	if limit := maxFileBytes[mimeType]; size > limit {
		return nil, kiterr.New(kiterr.PayloadTooLarge, "a "+mimeType+" file may have at most "+strconv.Itoa(limit)+" bytes")
	}
	out := make([]byte, size)
	n, err := base64.StdEncoding.Strict().Decode(out, text)
	if err != nil || n != size {
		return nil, kiterr.Invalid(path, "is not valid padded base64")
	}
	if sig, ok := magic[mimeType]; ok && !bytes.HasPrefix(out, sig) {
		return nil, kiterr.Invalid(path, "content does not match mimeType")
	}
	return out, nil
}

// streamedUpload runs the streamed reader over body, handed over in reads
// of step bytes (0: all at once), and checks the chunk layout.
func streamedUpload(t testing.TB, body []byte, step int) ([]byte, error) {
	t.Helper()
	u := NewReader(len(body))
	for rest := body; len(rest) > 0; {
		n := len(rest)
		if step > 0 {
			n = min(n, step)
		}
		u.Feed(rest[:n])
		rest = rest[n:]
	}
	var b Body
	chunks, err := u.Upload(&b)
	for i, c := range chunks {
		if len(c) == 0 || len(c) > actors.FileChunkSize || i < len(chunks)-1 && len(c) != actors.FileChunkSize {
			t.Fatalf("chunk %d of %d has %d bytes", i, len(chunks), len(c))
		}
	}
	return bytes.Join(chunks, nil), err
}

// sameAnswer fails unless the streamed reader answers body as the whole
// body answered it, whatever the size of the reads.
func sameAnswer(t testing.TB, body []byte) {
	t.Helper()
	want, wantErr := wholeBodyUpload(body)
	for _, step := range []int{0, 1, 3, 7, 4096} {
		if step == 1 && len(body) > 1<<20 {
			continue // byte by byte is for the small bodies
		}
		got, err := streamedUpload(t, body, step)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("reads of %d bytes: answer %v, the whole body gives %v", step, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reads of %d bytes: %d decoded bytes differ from the whole body's %d", step, len(got), len(want))
		}
	}
}

// uploadDoc is an upload body with contentBase64 as raw JSON text (quotes
// included), the other fields valid unless overridden in extra, which is
// raw JSON members appended after the content.
func uploadDoc(mimeType, content string, extra ...string) []byte {
	doc := `{"conversationId":"` + ids.New() + `","name":"n.txt","mimeType":"` + mimeType + `","contentBase64":` + content
	for _, e := range extra {
		doc += "," + e
	}
	return []byte(doc + "}")
}

func TestStreamedUploadAnswersAsTheWholeBody(t *testing.T) {
	conv := ids.New()
	long := strings.Repeat("A", 7_000_000)
	fiveMB := base64.StdEncoding.EncodeToString(fileTestBytes(5_000_000))
	tests := []struct {
		name string
		body []byte
		ok   bool // the upload is accepted
	}{
		{"a text file decodes", uploadDoc("text/plain", `"aGVsbG8="`), true},
		{"a file of two chunks and a bit decodes", uploadDoc("text/plain", `"`+base64.StdEncoding.EncodeToString(fileTestBytes(2*actors.FileChunkSize+5))+`"`), true},
		{"5000000 decoded bytes pass", uploadDoc("application/json", `"`+fiveMB+`"`), true},
		{"5000001 decoded bytes are payload_too_large", uploadDoc("application/json", `"`+base64.StdEncoding.EncodeToString(fileTestBytes(5_000_001))+`"`), false},
		{"contentBase64 before the other fields decodes", []byte(`{"contentBase64":"aGk=","conversationId":"` + conv + `","mimeType":"text/plain","name":"a"}`), true},
		{"an escaped slash decodes", uploadDoc("text/plain", `"\/\/8="`), true},
		{"\\u escapes of base64 characters decode", uploadDoc("text/plain", `"\u0061Gk\u003d"`), true},
		{"4 characters pass", uploadDoc("text/plain", `"aGk="`), true},
		{"3 characters are refused", uploadDoc("text/plain", `"aGk"`), false},
		{"7000000 characters are measured (and too large once decoded)", uploadDoc("text/plain", `"`+long+`"`), false},
		{"7000001 characters are refused", uploadDoc("text/plain", `"A`+long+`"`), false},
		{"7000001 raw characters with an escape are 7000000 once unescaped", uploadDoc("text/plain", `"\/`+long[1:]+`"`), false},
		{"base64url characters are refused", uploadDoc("text/plain", `"aGk-aGk_"`), false},
		{"padding inside is refused", uploadDoc("text/plain", `"aG==aGk="`), false},
		{"a character after the padding is refused", uploadDoc("text/plain", `"aGk=a"`), false},
		{"three padding characters are refused", uploadDoc("text/plain", `"aG==="`), false},
		{"a missing padding is refused", uploadDoc("text/plain", `"aGVsbG8"`), false},
		{"a padding beyond the length is refused", uploadDoc("text/plain", `"aGVsbG8=="`), false},
		{"non-zero padding bits are refused", uploadDoc("text/plain", `"aGVsbG9="`), false},
		{"padding only is refused", uploadDoc("text/plain", `"===="`), false},
		{"an escaped newline is outside the pattern", uploadDoc("text/plain", `"aGk=\n"`), false},
		{"an escaped quote is outside the pattern", uploadDoc("text/plain", `"aG\"k="`), false},
		{"a non-ASCII character is outside the pattern", uploadDoc("text/plain", `"aGké"`), false},
		{"invalid UTF-8 counts as raw bytes without a backslash (too short)", uploadDoc("text/plain", "\"\xff\xff\""), false},
		{"invalid UTF-8 counts as U+FFFD once a backslash unescapes the text", uploadDoc("text/plain", "\"\\/\xff\""), false},
		{"an unfinished UTF-8 sequence counts as U+FFFD per byte", uploadDoc("text/plain", "\"\\/\xe2\x82\""), false},
		{"a valid UTF-8 character is measured in bytes", uploadDoc("text/plain", "\"\\/\xe2\x82\xac\""), false},
		{"a lone surrogate is one U+FFFD (too short)", uploadDoc("text/plain", `"\ud83d"`), false},
		{"a surrogate pair is one 4-byte character", uploadDoc("text/plain", `"\ud83d\ude00"`), false},
		{"a low surrogate first is U+FFFD, then the pair counts", uploadDoc("text/plain", `"\ude00\ud83d\ude00"`), false},
		{"a surrogate before a plain character", uploadDoc("text/plain", `"\ud83dA"`), false},
		{"a surrogate before another escape", uploadDoc("text/plain", `"\ud83d\/AA"`), false},
		{"a surrogate before a \\u of a base64 character", uploadDoc("text/plain", `"\ud83d\u0041"`), false},
		{"a png with its signature passes", uploadDoc("image/png", `"`+base64.StdEncoding.EncodeToString(pngHeader)+`"`), true},
		{"a png without its signature is refused", uploadDoc("image/png", `"`+base64.StdEncoding.EncodeToString([]byte("GIF89a......"))+`"`), false},
		{"a short png is refused", uploadDoc("image/png", `"iVBO"`), false},
		{"a jpeg with FFD8FF passes", uploadDoc("image/jpeg", `"/9j/"`), true},
		{"a pdf that is text is refused", uploadDoc("application/pdf", `"aGVsbG8="`), false},
		{"text is not inspected", uploadDoc("text/markdown", `"iVBORw=="`), true},
		{"a control character in the content is a syntax error there", uploadDoc("text/plain", "\"aG\x01k=\""), false},
		{"an unknown escape in the content is a syntax error", uploadDoc("text/plain", `"aG\xk="`), false},
		{"a \\u escape with a non-hex digit is a syntax error", uploadDoc("text/plain", `"aG\u12G4"`), false},
		{"a syntax error before the content comes first", []byte(`{"a":tru,"contentBase64":"aG` + "\x01" + `k="}`), false},
		{"a syntax error after the content is placed in the whole body", uploadDoc("text/plain", `"`+fiveMB+`"`, `,`), false},
		{"a body that ends in the content", []byte(`{"conversationId":"` + conv + `","contentBase64":"aGk`), false},
		{"a body that ends after the content", []byte(`{"contentBase64":"aGk=","name":`), false},
		{"a body that ends right after the content", []byte(`{"name":"a","contentBase64":"aGk="`), false},
		{"a body that ends after a repeated key is malformed", []byte(`{"name":"a","name":0`), false},
		{"text after the object is a syntax error", append(uploadDoc("text/plain", `"aGk="`), " x"...), false},
		{"a field of the wrong type after the content", uploadDoc("text/plain", `"aGk="`, `"name":5`), false},
		{"a repeated contentBase64 is refused", uploadDoc("text/plain", `"aGVsbG8="`, `"contentBase64":"aGk="`), false},
		{"a repeated invalid contentBase64 is refused", uploadDoc("text/plain", `"aGk="`, `"contentBase64":"aGk"`), false},
		{"a repeated null contentBase64 is refused", uploadDoc("text/plain", `"aGk="`, `"contentBase64":null`), false},
		{"a repeated contentBase64 after a null is refused", uploadDoc("text/plain", `null`, `"contentBase64":"aGk="`), false},
		{"a key in another case is not contentBase64 (keys are case-sensitive)", []byte(`{"CONTENTBASE64":"aGk=","conversationId":"` + conv + `","mimeType":"text/plain","name":"a"}`), false},
		{"an escaped key is contentBase64", []byte(`{"content\u0042ase64":"aGk=","conversationId":"` + conv + `","mimeType":"text/plain","name":"a"}`), true},
		{"a key with a long s is not contentBase64", []byte(`{"contentBaſe64":"aGk=","conversationId":"` + conv + `","mimeType":"text/plain","name":"a"}`), false},
		{"a contentBase64 inside another field is not the content", uploadDoc("text/plain", `null`, `"x":{"contentBase64":"aGk=","y":["}",{"z":"\"{"}]}`), false},
		{"contentBase64 of another type", uploadDoc("text/plain", `12345678`), false},
		{"contentBase64 as an object", uploadDoc("text/plain", `{"a":"aGk="}`), false},
		{"a missing contentBase64", []byte(`{"conversationId":"` + conv + `","name":"a","mimeType":"text/plain"}`), false},
		{"a body that is not an object", []byte(`["aGk="]`), false},
		{"a body that is a string", []byte(`"aGk="`), false},
		{"an empty object", []byte(`{}`), false},
		{"an empty body", []byte(``), false},
		{"a blank body", []byte(" \t\r\n"), false},
		{"a body of Unicode spaces only", []byte("\u00a0\u0085 "), false},
		{"a byte order mark", append([]byte("\ufeff"), uploadDoc("text/plain", `"aGk="`)...), false},
		{"whitespace everywhere", []byte(" {\n \"contentBase64\" :\t\"aGk=\" , \"conversationId\" : \"" + conv + "\" , \"mimeType\":\"text/plain\",\"name\":\"a\" } "), true},
		{"a trailing comma", uploadDoc("text/plain", `"aGk="`, ``), false},
		{"a missing colon", []byte(`{"contentBase64" "aGk="}`), false},
		{"an invalid field before the content", uploadDoc("text/plain", `"aGk="`, `"name":""`), false},
		{"numbers and literals around the content", []byte(`{"n":-1.5e+3,"t":true,"f":false,"z":null,"contentBase64":"aGk=","conversationId":"` + conv + `","mimeType":"text/plain","name":"a"}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := wholeBodyUpload(tt.body); (err == nil) != tt.ok {
				t.Fatalf("the whole body gives %v, the row expects ok=%v", err, tt.ok)
			}
			sameAnswer(t, tt.body)
		})
	}
}

// fileTestBytes is n bytes that are not all alike.
func fileTestBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>11)
	}
	return b
}

// uploadSecret marks submitted bytes that no refusal may repeat.
const uploadSecret = "zqSECRETqz"

// FuzzStreamedUpload checks that the streamed reader answers any body as the
// whole body did (go test -fuzz FuzzStreamedUpload ./http/internal/upload/),
// and that a refusal repeats nothing of the body.
func FuzzStreamedUpload(f *testing.F) {
	conv := ids.New()
	for _, seed := range []string{
		`{"conversationId":"` + conv + `","name":"n","mimeType":"text/plain","contentBase64":"aGVsbG8="}`,
		`{"contentBase64":"\/\/8=","conversationId":"` + conv + `","mimeType":"image/jpeg","name":"a"}`,
		`{"conversationId":"` + conv + `","name":"n","mimeType":"image/png","contentBase64":"iVBORw0KGgo="}`,
		`{"contentBase64":"\ud83d\ude00\u0041=","contentBase64":"aGk=","x":[{"contentBase64":1}]}`,
		`{"CONTENTBASE64":"aG` + "\xff\x01" + `k=" , "mimeType":"application/pdf"}`,
		` {"a":tru,"contentBase64":"aGk`,
		`{"conversationId":"` + uploadSecret + `","name":"n","mimeType":"text/plain","contentBase64":"aGk="}`,
		`{"conversationId":"` + conv + `","name":"n","mimeType":"` + uploadSecret + `","contentBase64":"aGk="}`,
		`{"conversationId":"` + conv + `","name":"n","mimeType":"text/plain","contentBase64":"` + uploadSecret + `"}`,
		`{"conversationId":"` + conv + `","name":["` + uploadSecret + `"],"mimeType":"text/plain","contentBase64":"aGk="}`,
		`{"` + uploadSecret + `":1,"` + uploadSecret + `":2,"contentBase64":"aGk="}`,
	} {
		f.Add([]byte(seed), uint8(0))
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		want, wantErr := wholeBodyUpload(body)
		got, err := streamedUpload(t, body, int(step))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q in reads of %d: answer %v, the whole body gives %v", body, step, err, wantErr)
		}
		if err != nil && bytes.Contains(body, []byte(uploadSecret)) && strings.Contains(err.Error(), uploadSecret) {
			t.Fatalf("%q: error %q echoes the body", body, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q: decoded bytes differ", body)
		}
	})
}

func TestUploadMemory(t *testing.T) {
	content := fileTestBytes(5_000_000)
	body := uploadDoc("application/json", `"`+base64.StdEncoding.EncodeToString(content)+`"`)
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"the base64 text is never kept, and the chunks are no larger than the content", func(t *testing.T) {
			u := NewReader(len(body))
			if err := u.ReadBody(bytes.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			var b Body
			chunks, err := u.Upload(&b)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.skeleton) > 512 {
				t.Fatalf("the skeleton holds %d bytes", len(u.skeleton))
			}
			held := 0
			for _, c := range chunks {
				held += cap(c)
			}
			if held > len(content)+3 {
				t.Fatalf("%d bytes of chunks for %d bytes of content", held, len(content))
			}
			if !bytes.Equal(bytes.Join(chunks, nil), content) {
				t.Fatal("content differs")
			}
		}},
		{"contentBase64 written with an escape is not kept either", func(t *testing.T) {
			text := base64.StdEncoding.EncodeToString(fileTestBytes(100_000))
			for _, key := range []string{`contentBase64`, `content\u0042ase64`} {
				body := []byte(`{"conversationId":"` + ids.New() + `","name":"n","mimeType":"text/plain","` + key + `":"` + text + `"}`)
				u := NewReader(len(body))
				u.Feed(body)
				var b Body
				if _, err := u.Upload(&b); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if len(u.skeleton) > 512 {
					t.Fatalf("%s: the skeleton holds %d bytes", key, len(u.skeleton))
				}
			}
		}},
		{"content refused whatever its type keeps nothing decoded", func(t *testing.T) {
			for name, content := range map[string]string{
				"over the largest size": `"` + base64.StdEncoding.EncodeToString(fileTestBytes(maxStoredBytes+3)) + `"`,
				"outside the pattern":   `"` + base64.StdEncoding.EncodeToString(fileTestBytes(3_000_000)) + `-"`,
			} {
				body := uploadDoc("text/plain", content)
				u := NewReader(len(body))
				u.Feed(body)
				if u.text == nil || u.text.chunks != nil {
					t.Fatalf("%s: decoded bytes are kept", name)
				}
			}
		}},
		{"reading stops at a syntax error in the content", func(t *testing.T) {
			broken := bytes.Replace(body, []byte(`"contentBase64":"`), []byte("\"contentBase64\":\"AAAA\x01"), 1)
			r := &countingReader{r: bytes.NewReader(broken)}
			if err := NewReader(len(broken)).ReadBody(r); err != nil {
				t.Fatal(err)
			}
			if r.n > readSize {
				t.Fatalf("read %d of %d bytes", r.n, len(broken))
			}
		}},
		{"a body that ends before its Content-Length is a failed read", func(t *testing.T) {
			err := NewReader(len(body) + 1).ReadBody(bytes.NewReader(body))
			var readErr *ReadError
			if !errors.As(err, &readErr) {
				t.Fatalf("error %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
