// Package floors holds the layering of kitd's packages: a table of floors,
// from the wire formats and vocabulary at the bottom to the commands at
// the top, and a test that fails when a package imports one from a floor
// above its own, or stands on none (Pebble keeps such a test). It has no
// code a build uses: the floors are the table in floors_test.go, and
// CONTRIBUTING.md says where a new package goes.
package floors
