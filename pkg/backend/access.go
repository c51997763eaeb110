package backend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// GrantRole is what a principal granted on a session may do (docs/contract.md §10):
// readers inspect; drainers inspect and drain (run the session's queue:
// read every queued input, run the handler, write the replies and notes to
// the transcript); writers inspect and admit human input (and automation
// of the producers their grant names); owners do everything the owner
// does: admit any automation, drain, close, compress, switch, resolve,
// cancel, replay, grant and revoke.
type GrantRole string

const (
	RoleReader  GrantRole = "reader"
	RoleDrainer GrantRole = "drainer"
	RoleWriter  GrantRole = "writer"
	RoleOwner   GrantRole = "owner"
)

// GrantRoles lists the roles a grant may give, weakest first. A drainer
// and a writer are not ordered: each may do what the other may not.
var GrantRoles = []GrantRole{RoleReader, RoleDrainer, RoleWriter, RoleOwner}

// ParseGrantRole checks a role name.
func ParseGrantRole(s string) (GrantRole, error) {
	r := GrantRole(s)
	if !slices.Contains(GrantRoles, r) {
		return "", fmt.Errorf("role %q: want reader, drainer, writer or owner: %w", s, ErrInvalid)
	}
	return r, nil
}

// Grant gives a principal a role on a session besides its owner. Producers
// are the producers whose automation input a writer may admit; an owner
// grant admits every producer's, a reader none.
type Grant struct {
	Principal string    `json:"principal"`
	Role      GrantRole `json:"role"`
	Producers []string  `json:"producers,omitempty"`
}

// UnmarshalJSON also reads a bare string, how grants were written before
// they had roles: a principal allowed to admit human input, a writer.
func (g *Grant) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*g = Grant{Principal: name, Role: RoleWriter}
		return nil
	}
	type plain Grant
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*g = Grant(p)
	return nil
}

// CheckGrant checks a grant's shape: a valid principal, a role, producer
// names (only on a writer grant), at most MaxGrantProducers of them.
func CheckGrant(g Grant) error {
	if err := ValidatePrincipal(g.Principal); err != nil {
		return err
	}
	if _, err := ParseGrantRole(string(g.Role)); err != nil {
		return err
	}
	if len(g.Producers) > 0 && g.Role != RoleWriter {
		return fmt.Errorf("grant of %s to %q: producers are named only on a writer grant: %w", g.Role, g.Principal, ErrInvalid)
	}
	if len(g.Producers) > MaxGrantProducers {
		return fmt.Errorf("grant to %q names %d producers, more than %d: %w", g.Principal, len(g.Producers), MaxGrantProducers, ErrInvalid)
	}
	for _, p := range g.Producers {
		if err := ValidateProducer(p); err != nil {
			return err
		}
	}
	return nil
}

// NormalGrants returns grants sorted by principal, each with sorted,
// deduplicated producers, never nil: grants are a set, listed in one order.
func NormalGrants(gs []Grant) []Grant {
	out := make([]Grant, 0, len(gs))
	for _, g := range gs {
		if len(g.Producers) > 0 {
			p := slices.Clone(g.Producers)
			slices.Sort(p)
			g.Producers = slices.Compact(p)
		} else {
			g.Producers = nil
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Grant) int { return strings.Compare(a.Principal, b.Principal) })
	return out
}

// Action is something a principal does to a session.
type Action string

const (
	// ActInspect reads a session: show, queue, transcript, attach, viewers.
	ActInspect Action = "inspect"
	// ActAdmitHuman admits human input.
	ActAdmitHuman Action = "admit"
	// ActAdmitAutomation admits a producer's automation input.
	ActAdmitAutomation Action = "admit automation"
	// ActOperate closes, compresses, switches, resolves, cancels,
	// replays, grants and revokes.
	ActOperate Action = "operate"
	// ActDrain runs the session's queue: takes its drain lease, claims
	// and settles its admissions (reading every queued input, writing
	// the handler's replies and the notes to the transcript).
	ActDrain Action = "drain"
)

// Permits reports whether principal may do act on a session of owner and
// grants (producer: the producer of automation input). This one function
// is the rule every store and command applies.
func Permits(owner string, grants []Grant, principal string, act Action, producer string) bool {
	if principal == "" {
		return false
	}
	if principal == owner {
		return true
	}
	for _, g := range grants {
		if g.Principal != principal {
			continue
		}
		if !slices.Contains(GrantRoles, g.Role) {
			return false
		}
		switch act {
		case ActInspect:
			return true
		case ActAdmitHuman:
			return g.Role == RoleWriter || g.Role == RoleOwner
		case ActAdmitAutomation:
			return g.Role == RoleOwner || (g.Role == RoleWriter && slices.Contains(g.Producers, producer))
		case ActOperate:
			return g.Role == RoleOwner
		case ActDrain:
			return g.Role == RoleOwner || g.Role == RoleDrainer
		}
		return false
	}
	return false
}

// AdmitAction is the action an admission request needs.
func AdmitAction(k Kind) Action {
	if k == KindAutomation {
		return ActAdmitAutomation
	}
	return ActAdmitHuman
}

// Forbidden builds the ErrForbidden of principal refused act on session.
func Forbidden(session, principal string, act Action, producer string) error {
	what := string(act)
	if act == ActAdmitAutomation {
		what = fmt.Sprintf("admit automation input of producer %q", producer)
	}
	return Errorf(ErrForbidden, "%s on session %s: principal %q may not (not its owner, and no grant allows it)", what, session, principal)
}

// Caller is who opened a store, as the store knows it.
type Caller struct {
	// Name is the authenticated user: the Redis ACL user, or the OS user
	// of a file store. Empty when the store cannot tell (Redis's default
	// user): then no principal is protected from being claimed.
	Name string
	// Verified is set when the store itself authenticated Name (a Redis
	// ACL user with a password). A file store's OS user is not verified by
	// the store: the file's mode is the boundary.
	Verified bool
	// StoreAdmin is set when the caller administers the store itself (a
	// Redis user allowed to manage ACL users; the owner of the store file),
	// and so may grant and revoke the admin right.
	StoreAdmin bool
}
