//go:build !race

package raftnet_test

const raceEnabled = false
