//go:build race

package main

// raceSlowdown lengthens the runs of the tests that judge what a run of
// fixed length served: the race detector makes the code it watches
// several times slower (make race), and a 200 ms scenario of the fake
// kitd could end before its first answer.
const raceSlowdown = 4
