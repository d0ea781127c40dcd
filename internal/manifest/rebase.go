package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// EndpointURLs lists the manifest's endpoint URLs (oauth.redirectUrls,
// interactivity.url, endpoints.*) in field order.
func (m *Manifest) EndpointURLs() []string {
	urls := m.endpointURLs()
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u.url
	}
	return out
}

// Rebase returns the manifest text of a developer-sandbox install
// (POST /dev/sandbox/dev-install): every endpoint URL moved onto origin
// (scheme, host and port; each URL keeps its path and query; redirect URLs
// that become equal are kept once) and the distribution made private. text must be a manifest that Parse accepts;
// the result is re-encoded JSON, so key order and spacing change (the
// canonical hashes do not depend on them).
func Rebase(text string, origin *url.URL) (string, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("rebase manifest: %w", err)
	}
	move := func(s any) (any, error) {
		str, ok := s.(string)
		if !ok {
			return s, nil
		}
		u, err := url.Parse(str)
		if err != nil {
			return nil, fmt.Errorf("rebase manifest: endpoint URL: %w", err)
		}
		u.Scheme, u.Host, u.User = origin.Scheme, origin.Host, nil
		return u.String(), nil
	}
	var err error
	if o, ok := doc["oauth"].(map[string]any); ok {
		if list, ok := o["redirectUrls"].([]any); ok {
			// Redirect URLs that differed only in their origin become one
			// URL: the first is kept, as a repeated one would be refused.
			kept := list[:0]
			for _, v := range list {
				moved, err := move(v)
				if err != nil {
					return "", err
				}
				if !slices.Contains(kept, moved) {
					kept = append(kept, moved)
				}
			}
			o["redirectUrls"] = kept
		}
	}
	if o, ok := doc["interactivity"].(map[string]any); ok {
		if _, has := o["url"]; has {
			if o["url"], err = move(o["url"]); err != nil {
				return "", err
			}
		}
	}
	if o, ok := doc["endpoints"].(map[string]any); ok {
		for k, v := range o {
			if o[k], err = move(v); err != nil {
				return "", err
			}
		}
	}
	doc["distribution"] = "private"
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return "", fmt.Errorf("rebase manifest: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
