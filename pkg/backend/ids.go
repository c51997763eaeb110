package backend

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewAdmissionID returns a new admission id: 128 bits in lower-case hex,
// the first 48 of them the time in Unix milliseconds and the other 80
// random. Ids made later sort after ids made earlier (to the millisecond),
// so a store's index of admission ids grows at one end instead of at a
// random place: a bbolt batch then rewrites a few index pages per
// transaction instead of one page per admission. 80 random bits keep ids
// unique however many are made in one millisecond. A zero now means
// time.Now(); the order is only a matter of speed, never of correctness.
func NewAdmissionID(now time.Time) string {
	if now.IsZero() {
		now = time.Now()
	}
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		// crypto/rand never fails on supported platforms; an id that is
		// not random would break idempotency, so do not go on.
		panic("backend: crypto/rand: " + err.Error())
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(max(now.UnixMilli(), 0)))
	copy(b[:6], ms[2:])
	return hex.EncodeToString(b[:])
}
