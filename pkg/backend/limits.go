package backend

import (
	"fmt"
	"io"
	"os"
)

// Limits on every input, in one place. Each has its own error naming the
// field and the limit; `hermesq help limits` lists them.
const (
	// MaxIDLen bounds session and transcript ids (bytes).
	MaxIDLen = 256
	// MaxIdentityLen bounds identities and principals (bytes); request ids
	// have their own MaxRequestIDLen.
	MaxIdentityLen = 1024
	// MaxIdentities bounds the identities (and so the parts) of one offer.
	MaxIdentities = 1000
	// MaxProducerLen bounds a producer name (bytes of [a-z0-9_-]).
	MaxProducerLen = 64
	// DefaultPayloadLimit is the canonical payload size limit unless
	// configured (payload_limit).
	DefaultPayloadLimit = 1 << 20
	// MaxPayloadLimit is the largest payload_limit a configuration may set.
	MaxPayloadLimit = 4 << 20
	// MaxPayloadNesting bounds how deep a payload's objects and arrays nest.
	MaxPayloadNesting = 1000
	// MaxInputLine bounds one NDJSON line of admit --batch or import, and
	// what admit reads from stdin: room for the largest payload written
	// with escapes, so an oversized payload is refused by its own check.
	MaxInputLine = 2*MaxPayloadLimit + 1
	// MaxHandlerReply bounds the reply kept from a handler's stdout; a
	// longer reply fails the turn.
	MaxHandlerReply = MaxPayloadLimit
	// MaxErrorTail bounds the tail of a handler's stderr kept in a failed
	// admission's error.
	MaxErrorTail = 2048
	// MaxOutputTail bounds the tail of a supervised process's output kept
	// in its completion.
	MaxOutputTail = 2000
	// MaxGrants bounds the grants of one session.
	MaxGrants = 1000
	// MaxGrantProducers bounds the producers one writer grant names.
	MaxGrantProducers = 64
	// MaxUserFile bounds a file read whole from a path a user names: the
	// configuration file, a TLS certificate, key or CA file.
	MaxUserFile = 1 << 20
)

// ValidateProducer checks a producer name: 1–64 bytes of [a-z0-9_-] (the
// plugin binary is hermesq-producer-NAME).
func ValidateProducer(name string) error {
	if name == "" {
		return fmt.Errorf("producer name is empty: %w", ErrInvalid)
	}
	if len(name) > MaxProducerLen {
		return fmt.Errorf("producer name is %d bytes, more than %d: %w", len(name), MaxProducerLen, ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("producer name %q: byte %q at %d is not one of [a-z0-9_-]: %w", name, c, i, ErrInvalid)
		}
	}
	return nil
}

// Limit is one input limit as `hermesq help limits` lists it.
type Limit struct {
	Name  string
	Value string
	Error string // what the refusal says
}

// Limits lists every input limit of the contract.
func Limits() []Limit {
	return []Limit{
		{"session and transcript id", fmt.Sprintf("1-%d bytes of [A-Za-z0-9._:@/+-]", MaxIDLen), "session id is N bytes, more than 256"},
		{"identity", fmt.Sprintf("1-%d bytes of UTF-8, no NUL", MaxIdentityLen), "identity is N bytes, more than 1024"},
		{"principal", fmt.Sprintf("1-%d bytes of UTF-8, no control or bidirectional formatting character", MaxIdentityLen), "U+001B not allowed in a principal"},
		{"request id", fmt.Sprintf("1-%d bytes of UTF-8, not only white space, no control or bidirectional formatting character", MaxRequestIDLen), "request id is N bytes, more than 256"},
		{"import counters (seq, epoch, generation, next_seq)", "at most 2^53", "next_seq N is above the largest accepted (2^53 ...)"},
		{"identities of one offer", fmt.Sprint(MaxIdentities), "offer has N identities, more than 1000"},
		{"parts of one offer", fmt.Sprint(MaxIdentities), "offer has N parts, more than 1000"},
		{"producer name", fmt.Sprintf("1-%d bytes of [a-z0-9_-]", MaxProducerLen), "producer name ... is not one of [a-z0-9_-]"},
		{"payload (canonical JSON)", fmt.Sprintf("%d bytes by default, payload_limit up to %d", DefaultPayloadLimit, MaxPayloadLimit), "payload is N bytes, more than the limit of L"},
		{"payload nesting", fmt.Sprint(MaxPayloadNesting), "payload: nested deeper than 1000 levels"},
		{"admit --batch NDJSON line", fmt.Sprintf("%d bytes", MaxInputLine-1), "line N: line longer than 8388608 bytes"},
		{"admit text on stdin", fmt.Sprintf("%d bytes read", MaxInputLine), "payload is N bytes, more than the limit of L"},
		{"handler reply kept", fmt.Sprintf("%d bytes", MaxHandlerReply), "reply is larger than N bytes (the turn fails)"},
		{"handler stderr tail kept", fmt.Sprintf("%d bytes", MaxErrorTail), "(cut to the last bytes)"},
		{"process output tail kept", fmt.Sprintf("%d bytes", MaxOutputTail), "(cut to the last bytes)"},
		{"grants of one session", fmt.Sprint(MaxGrants), "grant on session S: it has 1000 grants, the limit (exit 4)"},
		{"producers of one writer grant", fmt.Sprint(MaxGrantProducers), "grant to P names N producers, more than 64"},
		{"config file, TLS ca/cert/key file", fmt.Sprintf("%d bytes", MaxUserFile), "config file F is N bytes, more than the limit of 1048576"},
	}
}

// ReadFileLimit reads the file at path whole, at most limit bytes: a
// longer one is ErrInvalid saying what it is (what), its size when the
// file tells it (a regular file) and the limit, and nothing past limit+1
// bytes is read, so a device that never ends (/dev/zero) or a file far
// too big costs no more than the limit. An error opening or reading the
// file is returned as it is (os.ErrNotExist stays testable).
func ReadFileLimit(what, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, fmt.Errorf("%s %s is %d bytes, more than the limit of %d: %w", what, path, fi.Size(), limit, ErrInvalid)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s is larger than the limit of %d bytes: %w", what, path, limit, ErrInvalid)
	}
	return b, nil
}

// MaxPayloadBytes is the largest canonical payload any configuration
// accepts (4 MiB).
const MaxPayloadBytes = 4 << 20
