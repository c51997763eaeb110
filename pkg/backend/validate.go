package backend

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxRequestIDLen bounds a request id (bytes).
const MaxRequestIDLen = 256

// MaxCounter is the largest seq, epoch or generation a store accepts from
// an import: 2^53, far above anything a store reaches by use, so counters
// keep room to grow and stay exact in every JSON reader (a float64 holds
// integers up to 2^53 exactly).
const MaxCounter = 1 << 53

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
			return fmt.Errorf("%s not allowed in a %s id (at byte %d; an id is 1-%d bytes of [A-Za-z0-9._:@/+-]): %w",
				charName(id[i:]), what, i, MaxIDLen, ErrInvalid)
		}
	}
	return nil
}

// charName names the character s starts with for an error message: 'x'
// for printable ASCII, U+202E for other characters, byte 0xff for a byte
// that is not UTF-8. It never returns the raw character, so a message
// cannot carry a terminal control sequence.
func charName(s string) string {
	c := s[0]
	switch {
	case c == ' ':
		return "a space"
	case c > ' ' && c < 0x7f:
		return fmt.Sprintf("%q", c)
	case c < 0x80:
		return fmt.Sprintf("U+%04X", c)
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("byte 0x%02x (not UTF-8)", c)
	}
	return fmt.Sprintf("%U", r)
}

// IsBidiControl reports whether r is a Unicode bidirectional formatting
// character (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069): text
// carrying one can display in another order than it is stored.
func IsBidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// ValidateRequestID checks a request id: 1-256 bytes of valid UTF-8 with no
// control character (C0, DEL, C1) and no bidirectional formatting
// character, and not only white space, so an id shows as what it is. Ids
// are compared byte-wise.
func ValidateRequestID(id string) error {
	if id == "" {
		return fmt.Errorf("request id is empty: %w", ErrInvalid)
	}
	if len(id) > MaxRequestIDLen {
		return fmt.Errorf("request id is %d bytes, more than %d: %w", len(id), MaxRequestIDLen, ErrInvalid)
	}
	if err := checkChars("request id", id, true); err != nil {
		return err
	}
	if strings.TrimSpace(id) == "" {
		return fmt.Errorf("request id is only white space: %w", ErrInvalid)
	}
	return nil
}

// checkChars refuses invalid UTF-8 and, with noControls, control and
// bidirectional formatting characters, naming the first one.
func checkChars(what, s string, noControls bool) error {
	for i, r := range s {
		if _, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size <= 1 {
			return fmt.Errorf("%s is not valid UTF-8 (byte 0x%02x at %d): %w", what, s[i], i, ErrInvalid)
		}
		if r == 0 {
			return fmt.Errorf("%s contains a NUL byte: %w", what, ErrInvalid)
		}
		if noControls && (unicode.IsControl(r) || IsBidiControl(r)) {
			return fmt.Errorf("%s not allowed in a %s (at byte %d): %w", charName(s[i:]), what, i, ErrInvalid)
		}
	}
	return nil
}

// ValidateToken checks an identity: 1-1024 bytes of valid UTF-8, compared
// byte-wise, no NUL (stores use NUL as a separator). Identities are opaque:
// other control characters are kept (and escaped in text output).
func ValidateToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty: %w", what, ErrInvalid)
	}
	if len(s) > MaxIdentityLen {
		return fmt.Errorf("%s is %d bytes, more than %d: %w", what, len(s), MaxIdentityLen, ErrInvalid)
	}
	return checkChars(what, s, false)
}

// ValidateName checks a principal or producer name: as ValidateToken, and
// no control or bidirectional formatting character.
func ValidateName(what, s string) error {
	if err := ValidateToken(what, s); err != nil {
		return err
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%s is only white space: %w", what, ErrInvalid)
	}
	return checkChars(what, s, true)
}

// ValidatePrincipal is the one check of a principal name, wherever one
// is given a right or acts (--principal, a session's owner, an admission's
// principal, session grant, admin grant, import): ValidateName, so no
// control or bidirectional formatting character ever reaches a store, and
// every command refuses the same names.
func ValidatePrincipal(s string) error { return ValidateName("principal", s) }

// ValidateRevokedPrincipal checks the principal of a revoke (session
// revoke, admin revoke): any name a store may hold, ValidatePrincipal's or
// not, so a name written before that check existed can still be removed.
func ValidateRevokedPrincipal(s string) error { return ValidateToken("principal", s) }

// CheckSetAdmin checks the principal of Store.SetAdmin: a grant names a
// valid principal (ValidatePrincipal), a revoke any name a store may hold
// (ValidateRevokedPrincipal).
func CheckSetAdmin(principal string, admin bool) error {
	if admin {
		return ValidatePrincipal(principal)
	}
	return ValidateRevokedPrincipal(principal)
}

// ValidateAdmissionID checks an admission id as admit creates them: 32
// lower-case hex digits (128 bits, NewAdmissionID).
func ValidateAdmissionID(id string) error {
	if len(id) != 32 {
		return fmt.Errorf("admission id %q is not 32 hex digits: %w", id, ErrInvalid)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("admission id %q is not 32 lower-case hex digits: %w", id, ErrInvalid)
		}
	}
	return nil
}

// CheckAdmitRequest checks the shape every store relies on in an
// AdmitRequest: a valid session id, a known kind, a principal, a payload;
// human input without identities and with a valid request id if any;
// automation input with at least one valid identity and no request id; a
// valid pinned target if any. The admission layer has validated the request
// in full; stores check it again with this one function, so a malformed
// request is refused alike by every store (ErrInvalid) and never stored.
func CheckAdmitRequest(r AdmitRequest) error {
	if err := ValidateID("session", r.Session); err != nil {
		return err
	}
	if err := ValidatePrincipal(r.Principal); err != nil {
		return err
	}
	if len(r.Payload) == 0 {
		return fmt.Errorf("empty payload: %w", ErrInvalid)
	}
	if r.PinnedTarget != "" {
		if err := ValidateID("pinned target", r.PinnedTarget); err != nil {
			return err
		}
	}
	switch r.Kind {
	case KindHuman:
		if len(r.Identities) > 0 || len(r.Parts) > 0 {
			return fmt.Errorf("human input with identities or parts (they are for automation input): %w", ErrInvalid)
		}
		if r.RequestID != "" {
			return ValidateRequestID(r.RequestID)
		}
	case KindAutomation:
		if r.RequestID != "" {
			return fmt.Errorf("automation input with a request id (request ids are for human input): %w", ErrInvalid)
		}
		if len(r.Identities) == 0 {
			return fmt.Errorf("automation input without identities: %w", ErrInvalid)
		}
		for _, id := range r.Identities {
			if err := ValidateToken("identity", id); err != nil {
				return err
			}
		}
		if len(r.Parts) > 0 {
			return checkParts(r)
		}
	default:
		return fmt.Errorf("kind %q is not %s or %s: %w", r.Kind, KindHuman, KindAutomation, ErrInvalid)
	}
	return nil
}

// CheckSettleRequest checks the shape of a SettleRequest every store relies
// on: an outcome of the contract, and messages with a valid transcript id
// and role. Stores run it before any write, so every store refuses a
// malformed settle alike (ErrInvalid).
func CheckSettleRequest(r SettleRequest) error {
	switch r.Outcome {
	case OutcomeCompleted, OutcomeFailed, OutcomeInterrupted, OutcomeCancelled:
	default:
		return fmt.Errorf("outcome %q is not one of completed, failed, interrupted, cancelled: %w", r.Outcome, ErrInvalid)
	}
	if r.Unwatched && !r.Direct {
		return fmt.Errorf("unwatched without direct: %w", ErrInvalid)
	}
	for i, m := range r.Messages {
		if err := ValidateID("message transcript", m.Transcript); err != nil {
			return err
		}
		switch m.Role {
		case RoleUser, RoleAssistant, RoleNote:
		default:
			return fmt.Errorf("message %d: role %q is not one of user, assistant, note: %w", i+1, m.Role, ErrInvalid)
		}
	}
	return nil
}

// CheckSettleClaimRequest checks a Store.SettleClaim request: a well-formed
// settle (CheckSettleRequest) of a claimed admission (not Direct), and a
// claim in the same session (one bbolt transaction, one Redis Cluster
// slot).
func CheckSettleClaimRequest(r SettleRequest, next ClaimRequest) error {
	if err := CheckSettleRequest(r); err != nil {
		return fmt.Errorf("settle %s: %w", r.AdmissionID, err)
	}
	if r.Direct {
		return fmt.Errorf("settle %s and claim the next: the settle must end a claimed admission (not direct): %w", r.AdmissionID, ErrInvalid)
	}
	if next.Session != r.Session {
		return fmt.Errorf("settle %s and claim %s: sessions %s and %s differ: %w", r.AdmissionID, next.AdmissionID, r.Session, next.Session, ErrInvalid)
	}
	return nil
}
