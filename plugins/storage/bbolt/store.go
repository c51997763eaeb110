// Package bbolt is the single-machine hermesq store: one bbolt file.
//
// bbolt lets one process at a time open a file, and every hermesq command
// is its own process, so the store holds the file open between operations
// only while no other process waits for it: an operation opens it (waiting
// for the lock at most Options.Timeout, then ErrUnavailable), and the last
// operation in flight in the process closes it when another process waits,
// or leaves it open for the next one (see linger). Concurrent goroutines
// share the open handle, and their writes are grouped into few commits
// (see commit.go).
//
// The files follow the roles of backend.Store: sessions.go and access.go
// (Sessions); admit.go and admissions.go (Admissions); lease.go, claim.go,
// settle.go, settle_run.go, settle_claim.go and subscribe.go (Drain);
// transcripts.go and viewers.go (Transcripts); export.go, import.go,
// compact.go and size.go (Maintenance). Under them, the transaction and its
// accessors (txn.go, txn_sessions.go, txn_transcripts.go,
// txn_admissions.go), the stored records and their codec (txn_records.go),
// and every bucket name with the check of the schema on open (schema.go).
package bbolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DefaultTimeout bounds the wait for the file lock when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// maxHold is how long a process keeps the file open, once opened, while
// its own operations keep arriving or it sits idle between them; past it,
// new operations wait until the file has been closed once and open it
// afresh. That lets other processes take their turn where a waiting process
// cannot be seen, and everywhere it unmaps the file: the pages of a large
// file read while mapped count in the process's resident memory until it is
// unmapped, so a long batch or drain keeps to what it touched in one hold.
const maxHold = 100 * time.Millisecond

// linger is how long the file stays open after the process's last
// operation ended, where a waiting process cannot be seen: a drain step's
// reads and commit, or a command's check on opening the store and its
// operation, follow each other within microseconds and then share one open
// of the file, while another process waits at most this much longer for
// its turn. Where waiters can be seen, the file is closed at once when the
// last operation ends and another process waits, and otherwise stays open
// for the next operation (a drainer's next turn) up to maxHold, the holder
// looking for a waiter every linger.
const linger = 2 * time.Millisecond

// errStoreClosed is the error of operations after Close.
var errStoreClosed = fmt.Errorf("store is closed: %w", backend.ErrInvalid)

// Store is a hermesq store in one bbolt file. It implements backend.Store.
type Store struct {
	path    string
	timeout time.Duration
	hold    time.Duration // maxHold; a field so tests can widen it

	mu       sync.Mutex
	db       *bolt.DB
	lock     *fileLock
	refs     int
	openedAt time.Time     // when the file was opened
	opening  chan struct{} // closed when an open in progress ends
	closing  chan struct{} // closed when the open handle is next closed
	poisoned bool          // a panic happened: close the handle after use
	closed   bool
	lingerT  *time.Timer // closes the file linger after the last release

	group commitQueue
	local localNotifier
	memo  recMemo // records decoded by queue listings, for the settles after
}

var _ backend.Store = (*Store)(nil)

// Open returns the store kept in the bbolt file at path, creating the file
// (mode 0600) and its directory (0700) on first use. It opens the file once
// to check that it is a hermesq store of a known schema version, then
// closes it again.
func Open(ctx context.Context, path string, opts backend.Options) (*Store, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("bbolt: store path %q is not absolute: %w", path, backend.ErrInvalid)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := &Store{path: filepath.Clean(path), timeout: timeout, hold: maxHold}
	s.group.store = s
	if opts.MustExist {
		if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("bbolt: store %s does not exist (only commands that write create it): %w", s.path, backend.ErrNotFound)
		}
	}
	if err := s.view(ctx, func(*txn) error { return nil }); err != nil {
		return nil, err
	}
	return s, nil
}

// Opener opens a store from a bbolt:///abs/path.db URL. It knows no query
// parameters and refuses relative paths.
func Opener(ctx context.Context, u *url.URL, opts backend.Options) (backend.Store, error) {
	if u.Scheme != "bbolt" {
		return nil, fmt.Errorf("bbolt: store url %q: scheme is not bbolt: %w", backend.RedactURL(u), backend.ErrInvalid)
	}
	if err := backend.CheckQuery(u); err != nil {
		return nil, fmt.Errorf("bbolt: %w", err)
	}
	if u.Host != "" || u.Opaque != "" || u.User != nil {
		return nil, fmt.Errorf("bbolt: store url %q: want bbolt:///absolute/path.db: %w", backend.RedactURL(u), backend.ErrInvalid)
	}
	if strings.ContainsRune(u.Path, 0) {
		return nil, fmt.Errorf("bbolt: store url %q: the path holds a NUL byte: %w", backend.RedactURL(u), backend.ErrInvalid)
	}
	if !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("bbolt: store url %q: path is not absolute: %w", backend.RedactURL(u), backend.ErrInvalid)
	}
	s, err := Open(ctx, u.Path, opts)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// DefaultPath is $XDG_STATE_HOME/hermesq/hermesq.db, with XDG_STATE_HOME
// defaulting to ~/.local/state.
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("bbolt: default store path: %v: %w", err, backend.ErrInvalid)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "hermesq", "hermesq.db"), nil
}

// Path returns the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close makes later operations fail. It does not wait: operations in
// flight finish, and the last of them closes the file (at once, if none is
// in flight). Subscriptions end.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.closeIdleLocked()
	return nil
}

// acquire returns the open handle, opening the file if no operation of the
// process has it open. Every acquire is paired with a release.
func (s *Store) acquire(ctx context.Context) (*bolt.DB, error) {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("bbolt: store %s: %w", s.path, errStoreClosed)
		}
		// A handle that saw a panic (a corrupt page) is not handed out
		// again: the operations still using it end, it closes, and the
		// next operation opens the file afresh.
		if s.db != nil && !s.poisoned && s.mayShareLocked() {
			s.refs++
			db := s.db
			s.mu.Unlock()
			return db, nil
		}
		if s.closeIdleLocked() {
			continue // it lingered past its hold: open afresh
		}
		var wait chan struct{}
		switch {
		case s.db != nil:
			// Held long enough (or poisoned): let the file close so
			// other processes can take their turn, then reopen.
			if s.closing == nil {
				s.closing = make(chan struct{})
			}
			wait = s.closing
		case s.opening != nil:
			wait = s.opening
		}
		if wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("bbolt: open %s: %v: %w", s.path, ctx.Err(), backend.ErrUnavailable)
			}
			s.mu.Lock()
			continue
		}
		s.opening = make(chan struct{})
		s.mu.Unlock()
		db, lock, err := s.openFile(ctx)
		s.mu.Lock()
		close(s.opening)
		s.opening = nil
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.db, s.lock, s.refs, s.openedAt, s.poisoned = db, lock, 1, time.Now(), false
		s.mu.Unlock()
		return db, nil
	}
}

// mayShareLocked reports whether a new operation may use the open handle:
// within hold of its open; s.mu is held and s.db is open.
func (s *Store) mayShareLocked() bool {
	return time.Since(s.openedAt) < s.hold
}

// release ends one acquire. The last one closes the file and drops the
// lock when another process waits for it or the hold is over; otherwise
// the file lingers for the next operation.
func (s *Store) release(panicked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if panicked {
		s.poisoned = true
	}
	if s.refs > 0 {
		return
	}
	if s.poisoned || s.closed || s.closing != nil {
		s.closeLocked()
		return
	}
	if want, _ := s.lock.othersWant(); want || time.Since(s.openedAt) >= s.hold {
		s.closeLocked()
		return
	}
	if s.lingerT == nil {
		s.lingerT = time.AfterFunc(linger, s.lingerEnd)
	} else {
		s.lingerT.Reset(linger)
	}
}

// lingerEnd closes the file if no operation took it up again and another
// process waits for it, or it cannot be told, or the hold is over;
// otherwise it looks again after linger.
func (s *Store) lingerEnd() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil || s.refs > 0 {
		return
	}
	want, known := s.lock.othersWant()
	if want || !known || time.Since(s.openedAt) >= s.hold {
		s.closeLocked()
		return
	}
	s.lingerT.Reset(linger)
}

// closeIdleLocked closes a handle left open (lingering) with no operation
// using it, and reports whether it did; s.mu is held.
func (s *Store) closeIdleLocked() bool {
	if s.db == nil || s.refs > 0 {
		return false
	}
	s.closeLocked()
	return true
}

// closeLocked closes the open handle and drops the lock; s.mu is held and
// no operation uses the handle.
func (s *Store) closeLocked() {
	_ = safeClose(s.db)
	s.lock.unlock()
	s.db, s.lock = nil, nil
	if s.closing != nil {
		close(s.closing)
		s.closing = nil
	}
}

func safeClose(db *bolt.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic closing: %v", r)
		}
	}()
	return db.Close()
}

// openFile takes the sidecar lock, opens the bbolt file and checks (or, for
// a new file, writes) the schema.
func (s *Store) openFile(ctx context.Context) (*bolt.DB, *fileLock, error) {
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("bbolt: open %s: %v: %w", s.path, err, backend.ErrInternal)
	}
	// Everything that can be told of the file without its lock is
	// checked before the lock is taken, so a path that is no store leaves
	// no "<path>.lock" beside it.
	fi, err := os.Stat(s.path)
	switch {
	case err == nil && fi.IsDir():
		return nil, nil, fmt.Errorf("bbolt: open %s: is a directory: %w", s.path, backend.ErrInternal)
	case err == nil && fi.Size() == 0:
		// An existing empty file is a truncated store, never a new one:
		// bbolt would silently write a fresh, empty store over it.
		return nil, nil, corrupt("open", s.path, "the file is empty")
	case err == nil:
		if err := looksLikeBolt(s.path); err != nil {
			return nil, nil, corrupt("open", s.path, err)
		}
	case errors.Is(err, syscall.ELOOP):
		return nil, nil, fmt.Errorf("bbolt: open %s: a loop of symbolic links: %w", s.path, backend.ErrInvalid)
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("bbolt: open %s: %v: %w", s.path, err, backend.ErrInternal)
	}
	lock, err := lockFile(ctx, s.path+".lock", deadline)
	if err != nil {
		return nil, nil, err
	}
	db, err := s.openLocked(deadline)
	if err != nil {
		lock.unlock()
		return nil, nil, err
	}
	return db, lock, nil
}

// boltMagic is the magic number of a bbolt meta page (bbolt's
// common.Magic), at metaMagicAt of each of the file's first two pages.
const (
	boltMagic   = 0xED0CDAED
	metaMagicAt = 16 // after the page header: id, flags, count, overflow
)

// looksLikeBolt reports, reading the file without its lock, whether it
// starts as a bbolt file does: the magic number in the meta page at its
// start, or in the second meta page (one page size in) when the first was
// torn. Only the meta pages' magic is read, which no commit changes.
func looksLikeBolt(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [4]byte
	for _, at := range []int64{metaMagicAt, int64(os.Getpagesize()) + metaMagicAt, 4096 + metaMagicAt} {
		if _, err := f.ReadAt(b[:], at); err == nil && binary.NativeEndian.Uint32(b[:]) == boltMagic {
			return nil
		}
	}
	return errors.New("not a bbolt file: no meta page")
}

// ErrCorrupt is the error of a store file that is corrupt or truncated. It
// wraps backend.ErrInternal (exit 1); the message names the file and the
// doctor command.
var ErrCorrupt = fmt.Errorf("corrupt or truncated store: %w", backend.ErrInternal)

// corrupt builds the ErrCorrupt of op on the file at path; the file is left
// as it is (never re-created).
func corrupt(op, path string, detail any) error {
	return fmt.Errorf("bbolt: %s %s: the store file is corrupt or truncated (%v); run 'hermesq doctor' for a report, and restore the file from a backup or an export: %w",
		op, path, detail, ErrCorrupt)
}

// openLocked opens the bbolt file once the sidecar lock is held.
func (s *Store) openLocked(deadline time.Time) (db *bolt.DB, err error) {
	// bolt.Open can panic on a corrupt file before it returns the handle;
	// keep the *os.File so the panic does not leave it open and locked.
	var file *os.File
	defer func() {
		if r := recover(); r != nil {
			err = corrupt("open", s.path, r)
		}
		if err != nil {
			if db != nil {
				_ = safeClose(db)
			}
			if file != nil {
				// A panic left bbolt's flock and mmap behind; the mmap keeps
				// the file open, so drop the flock explicitly.
				releaseFile(file)
			}
			db = nil
		}
	}()
	remaining := time.Until(deadline)
	if remaining < time.Millisecond {
		remaining = time.Millisecond
	}
	db, err = bolt.Open(s.path, 0o600, &bolt.Options{
		Timeout:      remaining,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	if err != nil {
		db = nil
		switch {
		case errors.Is(err, bolterrors.ErrTimeout):
			return nil, fmt.Errorf("bbolt: open %s: locked by another process for %v: %w", s.path, s.timeout, backend.ErrUnavailable)
		case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrChecksum):
			return nil, corrupt("open", s.path, err)
		case strings.Contains(err.Error(), "file size too small"):
			return nil, corrupt("open", s.path, err)
		default:
			return nil, fmt.Errorf("bbolt: open %s: %v: %w", s.path, err, backend.ErrInternal)
		}
	}
	if err := checkSize(db, s.path); err != nil {
		return db, err
	}
	return db, checkSchema(db, s.path)
}

// checkSize refuses a file shorter than the pages its meta page says it
// holds: a truncated file, which bbolt would open and then read past (or
// write over the hole).
func checkSize(db *bolt.DB, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bbolt: open %s: %v: %w", path, err, backend.ErrInternal)
	}
	return db.View(func(tx *bolt.Tx) error {
		if want := tx.Size(); fi.Size() < want {
			return corrupt("open", path, fmt.Sprintf("the file has %d bytes, its pages need %d", fi.Size(), want))
		}
		return nil
	})
}

// view runs fn in a read transaction on the open file.
func (s *Store) view(ctx context.Context, fn func(*txn) error) (err error) {
	db, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	panicked := false
	defer func() { s.release(panicked) }()
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			err = corrupt("read", s.path, r)
		}
	}()
	err = db.View(func(tx *bolt.Tx) error { return fn(&txn{tx: tx}) })
	return wrapBolt(s.path, err)
}

// wrapBolt turns an error of bbolt itself (not one of ours) into ErrInternal.
func wrapBolt(path string, err error) error {
	if err == nil || backend.CodeOf(err) != backend.CodeInternal || errors.Is(err, backend.ErrInternal) {
		return err
	}
	return fmt.Errorf("bbolt: %s: %v: %w", path, err, backend.ErrInternal)
}
