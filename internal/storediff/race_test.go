//go:build race

package storediff_test

// raceEnabled: under the race detector every operation costs several
// times more, so the bounded run is shorter.
const raceEnabled = true
