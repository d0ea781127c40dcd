package main

import (
	"net/url"
	"strings"
)

// The environment of every command: the developer token and the API base.

// defaultAPIURL is {base_url} of a kitd started with its default --listen.
const defaultAPIURL = "http://127.0.0.1:8080/api/v1"

// client is the API client configured from the environment.
func (e *env) client() (*Client, error) {
	token := strings.TrimSpace(e.getenv("KIT_DEV_TOKEN"))
	if token == "" {
		return nil, usagef("KIT_DEV_TOKEN is not set: export the developer token (kdev_...) of your workspace")
	}
	base, err := apiBase(e.getenv("KIT_API_URL"))
	if err != nil {
		return nil, err
	}
	return NewClient(base, token, e.http), nil
}

// apiBase turns KIT_API_URL into {base_url}.
func apiBase(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return defaultAPIURL, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("KIT_API_URL must be an http or https URL such as %s", defaultAPIURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = "/api/v1" // an origin: the server's public URL
	}
	u.RawPath = ""
	return u.String(), nil
}
