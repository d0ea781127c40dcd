package domainproof

// Test access to the error of the dial guard (DialPublicOnly).
var ErrNotPublic = errNotPublic
