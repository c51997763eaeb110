//go:build !race

package storediff_test

const raceEnabled = false
