package published

import (
	"os"
	"strconv"
	"testing"
)

func TestCache(t *testing.T) {
	text, err := os.ReadFile("../../../internal/manifest/testdata/full.json")
	if err != nil {
		t.Fatal(err)
	}
	var c Cache
	t.Run("a version is parsed once", func(t *testing.T) {
		first := c.Parse("kit", "1.0.0", string(text))
		if first == nil {
			t.Fatal("the manifest does not parse")
		}
		if again := c.Parse("kit", "1.0.0", "not read again"); again != first {
			t.Fatal("parsed again")
		}
	})
	t.Run("a manifest that no longer parses is nil", func(t *testing.T) {
		if m := c.Parse("kit", "2.0.0", "{"); m != nil {
			t.Fatal("a broken manifest parsed")
		}
	})
	t.Run("a full cache starts over", func(t *testing.T) {
		for i := range size {
			c.Parse("other", strconv.Itoa(i), string(text))
		}
		if len(c.m) > size {
			t.Fatalf("%d entries, bound %d", len(c.m), size)
		}
	})
}
