//go:build !linux

package lockwant

// Without open file description locks a waiter cannot be seen.

// Mark does nothing here.
func Mark(uintptr) {}

// Unmark does nothing here.
func Unmark(uintptr) {}

// Others cannot tell here.
func Others(uintptr) (want, known bool) { return false, false }
