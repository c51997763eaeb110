//go:build unix && !linux

package bbolt

// Without open file description locks a waiter cannot be seen: the holder
// keeps the file open only briefly after its last operation (linger) and
// at most maxHold while operations keep coming.

func markWant(int) {}

func unmarkWant(int) {}

func othersWant(int) (want, known bool) { return false, false }
