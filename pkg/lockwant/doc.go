// Package lockwant lets a process that waits for another's exclusive lock
// on a file say so, and the holder see it, so that a holder which keeps the
// file open between its own operations yields it at once to a waiter.
//
// A waiter marks the descriptor it waits with (an open file description of
// the file the lock is on, or of a file beside it) with an open file
// description (OFD) read lock on one byte, and drops the mark once it
// holds the lock. OFD locks are separate from flock and from each other's
// descriptors, so the holder can ask the kernel, through a descriptor of
// its own on the same file, whether any other descriptor marks that byte.
// The mark is advisory, and only Linux has OFD locks: elsewhere (or on a
// file system without byte-range locks) Others reports that it cannot
// tell, and a holder should then not keep the file open on its own
// account.
//
// Both hermesq's bbolt store (its sidecar lock file) and a producer's
// outbox (its bbolt file) use it.
package lockwant
