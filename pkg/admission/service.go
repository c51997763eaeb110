package admission

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Payload limits of the contract (docs/contract.md §2).
const (
	DefaultMaxPayload = backend.DefaultPayloadLimit // 1 MiB of canonical payload
	MaxPayloadLimit   = backend.MaxPayloadLimit     // the largest limit a Service may be configured with
)

// DefaultViewerTTL is the lease of a viewer added without a ttl.
const DefaultViewerTTL = 60 * time.Second

// Service applies the contract over one store. The zero value is not
// usable: Store must be set. A Service holds no state of its own and is safe
// for concurrent use.
type Service struct {
	Store      backend.Store
	Now        func() time.Time // nil: time.Now
	MaxPayload int              // bytes of canonical payload; 0: 1 MiB; more than 4 MiB is invalid
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// NewID returns a random 128-bit id in lower-case hex (drainer names,
// compression children). Admission ids come from backend.NewAdmissionID.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms; an id that is
		// not random would break idempotency, so do not go on.
		panic("admission: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
