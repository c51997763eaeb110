//go:build linux

package lockwant_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/lockwant"
)

// A mark is seen through any other descriptor of the file, not through
// the one that set it, and is gone once dropped or its descriptor closed.
func TestMarkSeenByOtherDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func() *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	holder, waiter := open(), open()
	if want, known := lockwant.Others(holder.Fd()); want || !known {
		t.Fatalf("before any mark: want %v, known %v; want false, true", want, known)
	}
	lockwant.Mark(waiter.Fd())
	if want, _ := lockwant.Others(holder.Fd()); !want {
		t.Fatal("the holder does not see the waiter's mark")
	}
	if want, _ := lockwant.Others(waiter.Fd()); want {
		t.Fatal("the waiter sees its own mark as another's")
	}
	lockwant.Unmark(waiter.Fd())
	if want, _ := lockwant.Others(holder.Fd()); want {
		t.Fatal("the mark is still seen after Unmark")
	}
	lockwant.Mark(waiter.Fd())
	waiter.Close()
	if want, _ := lockwant.Others(holder.Fd()); want {
		t.Fatal("the mark is still seen after its descriptor closed")
	}
}
