package backend

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// lastID is the last admission id this process made, as two integers: the
// first 64 bits (48 of milliseconds and 16 random) and the last 64.
var lastID struct {
	sync.Mutex
	hi, lo uint64
}

// NewAdmissionID returns a new admission id: 128 bits in lower-case hex,
// the first 48 of them the time in Unix milliseconds and the other 80
// random. Within a process every id sorts after the ones made before it:
// an id made in the millisecond of the last one (or earlier, the clock
// having gone back) is the last one plus one. So a store's index of
// admission ids grows at one end instead of at a random place (a bbolt
// batch rewrites a few index pages per transaction instead of one page per
// admission), and the lines of one `admit --batch` get ids in seq order.
// 80 random bits where each millisecond starts keep ids unique across
// processes. A zero now means time.Now().
func NewAdmissionID(now time.Time) string {
	if now.IsZero() {
		now = time.Now()
	}
	var r [10]byte
	if _, err := rand.Read(r[:]); err != nil {
		// crypto/rand never fails on supported platforms; an id that is
		// not random would break idempotency, so do not go on.
		panic("backend: crypto/rand: " + err.Error())
	}
	hi := uint64(max(now.UnixMilli(), 0))<<16 | uint64(binary.BigEndian.Uint16(r[:2]))
	lo := binary.BigEndian.Uint64(r[2:])
	lastID.Lock()
	if hi>>16 <= lastID.hi>>16 {
		hi, lo = lastID.hi, lastID.lo+1
		if lo == 0 {
			hi++ // carried: the 80 bits were all ones
		}
	}
	lastID.hi, lastID.lo = hi, lo
	lastID.Unlock()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return hex.EncodeToString(b[:])
}
