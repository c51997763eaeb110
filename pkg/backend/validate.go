package backend

import "fmt"

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
	if err := ValidateToken("principal", r.Principal); err != nil {
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
			return ValidateToken("request id", r.RequestID)
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
