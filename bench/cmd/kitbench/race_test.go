//go:build race

package main

// raceEnabled: the race detector makes the code it watches several times
// slower, so a scenario that must fit a burst, a 429 and its retry into a
// few seconds is given longer under it (make race).
const raceEnabled = true
