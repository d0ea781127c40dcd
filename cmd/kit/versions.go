package main

import (
	"context"
	"flag"
)

// setupUpload is `kit versions upload FILE [--publish]`.
func setupUpload(fs *flag.FlagSet) runner {
	publish := fs.Bool("publish", false, "publish the version as it is registered")
	return func(ctx context.Context, e *env, pos []string) error {
		c, text, err := withManifest(e, pos[0])
		if err != nil {
			return err
		}
		r, err := c.UploadVersion(ctx, text, *publish)
		if err != nil {
			return err
		}
		if e.json {
			return writeJSON(e.stdout, r)
		}
		return formatVersionResult(e.stdout, "upload", r)
	}
}

// runPublish is `kit versions publish KIT VERSION`.
func runPublish(ctx context.Context, e *env, pos []string) error {
	c, kitID, err := e.kitClient(ctx, pos[0])
	if err != nil {
		return err
	}
	r, err := c.PublishVersion(ctx, kitID, pos[1])
	if err != nil {
		return err
	}
	if e.json {
		return writeJSON(e.stdout, r)
	}
	return formatVersionResult(e.stdout, "publish", r)
}
