package verify

// Test access to the dial guard of New's Fetcher.
var (
	ErrNotPublic   = errNotPublic
	DialPublicOnly = dialPublicOnly
)
