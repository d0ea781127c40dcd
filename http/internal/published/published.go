// Package published keeps parsed manifests of published Kit versions for
// the front end: the developer API's consent diff and the app host's install
// page both show one, and parsing a large manifest is most of their work. It
// owns nothing but that cache; it never reads storage or talks to actors.
package published

import (
	"sync"

	"github.com/kitd/kitd/internal/manifest"
)

// Cache keeps parsed published manifests: a registered version is immutable, so (Kit, version) names one manifest
// forever, and parsing a large one is most of a validate call. Bounded:
// it starts over when full.
type Cache struct {
	mu sync.Mutex
	m  map[string]*manifest.Manifest
}

// size bounds the cache: it starts over when full.
const size = 256

// Parse returns the parsed manifest of kitID@version, text; nil when the
// stored text no longer parses (it did when registered).
func (c *Cache) Parse(kitID, version, text string) *manifest.Manifest {
	k := kitID + "@" + version
	c.mu.Lock()
	m, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return m
	}
	m, problems := manifest.Parse(text)
	if len(problems) > 0 {
		return nil
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= size {
		c.m = make(map[string]*manifest.Manifest)
	}
	c.m[k] = m
	c.mu.Unlock()
	return m
}
