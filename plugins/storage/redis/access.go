package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hermesq/hermesq/pkg/backend"
)

// grantValue is a grant as the grants hash holds it: JSON of its role and
// producers (the principal is the hash field).
func grantValue(g backend.Grant) (string, error) {
	b, err := json.Marshal(struct {
		Role      backend.GrantRole `json:"role"`
		Producers []string          `json:"producers,omitempty"`
	}{g.Role, g.Producers})
	if err != nil {
		return "", errInternalf("encode grant: %v", err)
	}
	return string(b), nil
}

// Grant gives g.Principal g.Role on the session, replacing its grant.
func (s *Store) Grant(ctx context.Context, session string, g backend.Grant) error {
	if err := backend.CheckGrant(g); err != nil {
		return fmt.Errorf("redis: grant on session %s: %w", session, err)
	}
	g = backend.NormalGrants([]backend.Grant{g})[0]
	v, err := grantValue(g)
	if err != nil {
		return err
	}
	r, err := s.eval(ctx, scriptGrant, []string{s.k.session(session), s.k.grants(session)},
		s.k.changes(), session, g.Principal, v, backend.MaxGrants)
	if err != nil {
		return s.wrap("grant "+session, err)
	}
	switch status(r) {
	case "owner":
		return backend.Errorf(backend.ErrInvalid, "redis: grant on session %s: %q is its owner", session, g.Principal)
	case "conflict":
		return backend.Errorf(backend.ErrConflict, "redis: grant on session %s: it has %d grants, the limit", session, backend.MaxGrants)
	}
	return s.scriptErr(r, "grant", "session "+session)
}

// Revoke removes principal's grant on the session.
func (s *Store) Revoke(ctx context.Context, session, principal string) error {
	r, err := s.eval(ctx, scriptRevoke, []string{s.k.session(session), s.k.grants(session)},
		s.k.changes(), session, principal)
	if err != nil {
		return s.wrap("revoke "+session, err)
	}
	if status(r) == "no_grant" {
		return backend.Errorf(backend.ErrNotFound, "redis: revoke on session %s: %q has no grant", session, principal)
	}
	return s.scriptErr(r, "revoke", "session "+session)
}

// Caller is the ACL user this connection authenticated as (ACL WHOAMI).
// The default user names no one: every client that reaches a server
// without ACL users is "default", so then Name is empty and no principal is
// protected. A user allowed to list the ACL users administers the server
// (it could give itself any right) and is the StoreAdmin.
func (s *Store) Caller(ctx context.Context) (backend.Caller, error) {
	var c backend.Caller
	err := s.readRetry(ctx, "acl whoami", func() error {
		who, err := s.client.Do(ctx, "ACL", "WHOAMI").Text()
		if err != nil {
			if isUnknownCommand(err) {
				who, err = "default", nil // a server without ACLs
			} else {
				return err
			}
		}
		c = backend.Caller{}
		if who != "default" {
			c.Name, c.Verified = who, true
		}
		if err := s.client.Do(ctx, "ACL", "USERS").Err(); err == nil {
			c.StoreAdmin = true
		} else if isUnknownCommand(err) {
			c.StoreAdmin = true
		} else if !isNoPerm(err) {
			return err
		}
		return nil
	})
	return c, err
}

func isUnknownCommand(err error) bool {
	return strings.HasPrefix(err.Error(), "ERR unknown command")
}

func isNoPerm(err error) bool {
	return strings.HasPrefix(err.Error(), "NOPERM")
}

// SetAdmin adds principal to, or removes it from, the admins set.
func (s *Store) SetAdmin(ctx context.Context, principal string, admin bool) error {
	if err := backend.CheckSetAdmin(principal, admin); err != nil {
		return err
	}
	if admin {
		if err := s.client.SAdd(ctx, s.k.admins(), principal).Err(); err != nil {
			return s.wrap("grant admin", err)
		}
		return nil
	}
	n, err := s.client.SRem(ctx, s.k.admins(), principal).Result()
	if err != nil {
		return s.wrap("revoke admin", err)
	}
	if n == 0 {
		return backend.Errorf(backend.ErrNotFound, "redis: revoke admin: %q is not an admin", principal)
	}
	return nil
}

// Admins lists the principals with the admin right, sorted.
func (s *Store) Admins(ctx context.Context) ([]string, error) {
	var out []string
	err := s.readRetry(ctx, "list admins", func() error {
		var err error
		out, err = s.client.SMembers(ctx, s.k.admins()).Result()
		return err
	})
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out, err
}
