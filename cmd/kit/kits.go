package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kitd/kitd/internal/ids"
)

// runKitsList is `kit kits list`.
func runKitsList(ctx context.Context, e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	l, err := c.Kits(ctx)
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, l)
	}
	return formatKits(e.stdout, l.Kits)
}

// runKitsShow is `kit kits show KIT`.
func runKitsShow(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	d, err := c.Kit(ctx, kitID)
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, d)
	}
	return formatKitDetail(e.stdout, &d.Detail)
}

// resolveKit turns a KIT argument into a Kit id. An id is passed on
// unchecked (the server answers 404 for one that is not the workspace's);
// anything else is looked up as a slug among the workspace's Kits, because
// developers know their Kits by slug and the API takes ids only.
// kitClient is the client and the id of the Kit that arg names (an id, or
// a slug of one of the workspace's Kits).
func (e *env) kitClient(ctx context.Context, arg string) (*Client, string, error) {
	c, err := e.client()
	if err != nil {
		return nil, "", err
	}
	kitID, err := resolveKit(ctx, c, arg)
	if err != nil {
		return nil, "", err
	}
	return c, kitID, nil
}

func resolveKit(ctx context.Context, c *Client, arg string) (string, error) {
	// An id as the API gives it, or in upper case, which the API's
	// lower-case ids would not match (UUIDs are case-insensitive to a
	// person copying one). A slug starts with a lower-case letter and may
	// have an id's shape: such an argument is looked up as a slug first.
	id := strings.ToLower(arg)
	maybeSlug := arg != "" && 'a' <= arg[0] && arg[0] <= 'z'
	if ids.Valid(id) && !maybeSlug {
		return id, nil
	}
	l, err := c.Kits(ctx)
	if err != nil {
		return "", err
	}
	for _, k := range l.Kits {
		if k.Slug == arg {
			return k.KitID, nil
		}
	}
	if ids.Valid(id) {
		return id, nil // no slug of the workspace: an id, which the server checks
	}
	return "", fmt.Errorf("no Kit of this workspace has the id or slug %q (kit kits list shows them)", arg)
}
