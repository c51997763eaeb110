package backend

import "fmt"

// Limits of the contract.
const (
	MaxIDLen       = 256  // session and transcript ids
	MaxIdentityLen = 1024 // identities, request ids, principals
)

// ValidateID checks a session or transcript id: 1–256 bytes of
// [A-Za-z0-9._:@/+-]. what names the field in the error.
func ValidateID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s id is empty: %w", what, ErrInvalid)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%s id is %d bytes, more than %d: %w", what, len(id), MaxIDLen, ErrInvalid)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '@', c == '/', c == '+', c == '-':
		default:
			return fmt.Errorf("%s id %q: byte %q at %d is not one of [A-Za-z0-9._:@/+-]: %w", what, id, c, i, ErrInvalid)
		}
	}
	return nil
}

// ValidateToken checks an identity, request id or principal: 1–1024 bytes,
// compared byte-wise, no NUL (stores use NUL as a separator).
func ValidateToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty: %w", what, ErrInvalid)
	}
	if len(s) > MaxIdentityLen {
		return fmt.Errorf("%s is %d bytes, more than %d: %w", what, len(s), MaxIdentityLen, ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("%s contains a NUL byte: %w", what, ErrInvalid)
		}
	}
	return nil
}
