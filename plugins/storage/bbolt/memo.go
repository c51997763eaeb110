package bbolt

import "sync"

// memoMax bounds the records a memo keeps: a drain step lists at most a
// run of queued admissions (512) and then settles them.
const memoMax = 1024

// recMemo remembers admission records decoded while listing the queue, so
// that the write transaction settling them (which reads each again to check
// it is the FIFO head) does not decode them a second time. A record is
// looked up by its stored bytes: it is used only when the bytes now stored
// are exactly the bytes that were decoded, so what it returns is what
// decoding them would return. Each entry is taken at most once (the taker
// may change it).
type recMemo struct {
	mu sync.Mutex
	m  map[string]admRec // stored bytes → the record they decode to
}

// put remembers that stored decodes to a.
func (m *recMemo) put(stored []byte, a *admRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= memoMax {
		m.m = make(map[string]admRec, 64)
	}
	m.m[string(stored)] = *a
}

// take returns the record stored decodes to, if remembered, and forgets it.
func (m *recMemo) take(stored []byte) (admRec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.m[string(stored)]
	if ok {
		delete(m.m, string(stored))
	}
	return a, ok
}
