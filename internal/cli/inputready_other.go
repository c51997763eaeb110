//go:build !unix

package cli

import "io"

// inputReady reports whether reading r would return at once; off Unix it
// is not asked, and a batch's chunks are cut by size alone.
func inputReady(io.Reader) func() bool { return alwaysReady }
